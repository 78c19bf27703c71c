// Why: see log_follow.h.
#include "server/log_follow.h"

#include <algorithm>

#include "server/error_text.h"
#include "server/job_watchers.h"
#include "server/unary_call.h"

namespace mixtrain::server {
namespace {

v1::LogLine to_proto(const LogRecord& record) {
  v1::LogLine line;
  line.set_attempt(record.attempt);
  line.set_rank(record.rank);
  line.set_unix_ms(record.unix_ms);
  line.set_text(record.text);
  line.set_seq(record.seq);
  return line;
}

}  // namespace

void LogFollow::line_appended(const LogRecord& line, int64_t previous_seq) {
  {
    absl::MutexLock lock(&mu_);
    told_seq_ = std::max(told_seq_, line.seq);
    const bool idle = !writing_ && !reading_ && !finishing_ && !read_store_ && page_.empty();
    // previous_seq > have_seq_: an earlier line's notice is still on its way.
    if (!idle || line.seq <= have_seq_ || previous_seq > have_seq_) return;
    current_ = to_proto(line);
    have_seq_ = line.seq;
    writing_ = true;
  }
  StartWrite(&current_);
}

bool LogFollow::finish(grpc::Status status) {
  Next next;
  {
    absl::MutexLock lock(&mu_);
    if (finishing_) return false;
    finishing_ = true;
    status_ = std::move(status);
    read_store_ = true;  // lines stored before the end whose notices have not come yet
    next = next_locked();
  }
  if (next == Next::kRead) return true;
  run(next);  // a write or Finish: neither waits
  return false;
}

void LogFollow::advance() {
  Next next;
  {
    absl::MutexLock lock(&mu_);
    next = next_locked();
  }
  run(next);
}

void LogFollow::run(Next next) {
  while (true) {
    if (next == Next::kIdle) return;
    if (next == Next::kWrite) {
      StartWrite(&current_);
      return;
    }
    if (next == Next::kFinish) {
      grpc::Status status;
      {
        absl::MutexLock lock(&mu_);
        status = status_;
      }
      Finish(bounded_status(status));
      return;
    }
    const absl::StatusOr<std::vector<LogRecord>> page =
        database_->logs(job_id_, read_after_, kPageLines);
    metrics_->log_page_read();
    absl::MutexLock lock(&mu_);
    reading_ = false;
    take_page_locked(page);
    next = next_locked();
  }
}

LogFollow::Next LogFollow::next_locked() {
  if (writing_ || reading_ || finished_) return Next::kIdle;
  if (!page_.empty()) {
    current_ = std::move(page_.front());
    page_.pop_front();
    writing_ = true;
    return Next::kWrite;
  }
  if (!broken_ && (read_store_ || told_seq_ > have_seq_)) {
    read_after_ = have_seq_;
    read_told_ = told_seq_;
    reading_ = true;
    return Next::kRead;
  }
  if (finishing_) {
    finished_ = true;
    return Next::kFinish;
  }
  return Next::kIdle;
}

void LogFollow::take_page_locked(const absl::StatusOr<std::vector<LogRecord>>& page) {
  if (!page.ok()) {  // the client reconnects after its last line
    end_locked({grpc::StatusCode::UNAVAILABLE,
                "cannot read the log of job '" + job_id_ + "': " + std::string(page.status().message())});
    return;
  }
  if (broken_) return;
  for (const LogRecord& line : *page) {
    if (line.seq <= have_seq_) continue;
    page_.push_back(to_proto(line));
    have_seq_ = line.seq;
  }
  read_store_ = int64_t(page->size()) == kPageLines;
  // Lines told of before the read and not in the store were trimmed: none
  // to wait for. (One told of during the read may be newer than it saw.)
  if (page->empty() && told_seq_ == read_told_) told_seq_ = have_seq_;
}

void LogFollow::end_locked(grpc::Status status) {
  page_.clear();
  broken_ = true;
  if (!finishing_) status_ = std::move(status);
  finishing_ = true;
}

void LogFollow::OnWriteDone(bool ok) {
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) end_locked({grpc::StatusCode::CANCELLED, "the stream broke"});
  }
  advance();
}

void LogFollow::OnCancel() {
  {
    absl::MutexLock lock(&mu_);
    end_locked(grpc::Status::CANCELLED);
  }
  advance();
}

void LogFollow::OnDone() {
  hub_->forget(this);
  delete this;
}

}  // namespace mixtrain::server
