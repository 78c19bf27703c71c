// Why: see job_follower.h.
#include "client/job_follower.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <utility>

#include "client/job_view.h"
#include "launch/progress_printer.h"
#include "proto/step_progress.h"

namespace mixtrain::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Prints what changed between the job updates it is shown.
class JobWatcher {
 public:
  JobWatcher(std::ostream& out, bool terminal)
      : printer_(out, terminal), progress_(printer_.callbacks()) {}

  void show(const v1::Job& job) {
    if (!on_next_update_.empty()) note(std::exchange(on_next_update_, ""));
    if (job.state() != state_ || job.attempt() != attempt_) {
      state_ = job.state();
      attempt_ = job.attempt();
      std::string line = state_name(job.state());
      if (job.attempt() > 0) line += " (attempt " + std::to_string(job.attempt()) + ")";
      if (!job.message().empty()) line += ": " + job.message();
      note(line);
    }
    const v1::Progress& p = job.progress();
    if (job.state() == v1::JOB_STATE_RUNNING && p.step() > 0 && p.step() != step_) {
      step_ = p.step();
      progress_.on_step(v1::step_from_progress(p));
    }
    if (p.val_loss() != 0.0 && p.val_loss() != val_loss_) {
      val_loss_ = p.val_loss();
      progress_.on_eval({p.step(), p.val_loss()});
    }
  }

  void note(const std::string& line) { progress_.on_log(line); }
  // A line to print before the next update (when one arrives again).
  void note_next_update(std::string line) { on_next_update_ = std::move(line); }
  void finish() { printer_.finish(); }

 private:
  launch::ProgressPrinter printer_;
  TrainerProgress progress_;
  v1::JobState state_ = v1::JOB_STATE_UNSPECIFIED;
  int32_t attempt_ = -1;
  int64_t step_ = 0;
  double val_loss_ = 0.0;
  std::string on_next_update_;
};

// One read of the job: a WatchJob stream to its end, or one GetJob.
struct Reading {
  grpc::Status status;
  bool heard = false;       // at least one update arrived
  std::string stop_reason;  // why the follow must end now; empty: it goes on
};

Reading watch(CoordinatorClient& client, const std::string& id, JobWatcher& watcher,
              std::optional<v1::Job>& last, const FollowOptions& options) {
  grpc::ClientContext context;
  client.prepare_stream(context);
  v1::WatchJobRequest request;
  request.set_id(id);
  Reading reading;
  std::unique_ptr<grpc::ClientReader<v1::JobUpdate>> reader =
      client.jobs().WatchJob(&context, request);
  // A job that does not change blocks Read, so the stop reason is asked on
  // a thread of its own, which cancels the stream when there is one.
  std::atomic<bool> ended{false};
  std::thread guard;
  if (options.stop_reason) {
    guard = std::thread([&] {
      while (!ended.load()) {
        std::string reason = options.stop_reason();
        if (!reason.empty()) {
          reading.stop_reason = std::move(reason);
          context.TryCancel();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  v1::JobUpdate update;
  while (reader->Read(&update)) {
    reading.heard = true;
    watcher.show(update.job());
    last = update.job();
  }
  reading.status = reader->Finish();
  ended = true;
  if (guard.joinable()) guard.join();
  return reading;
}

Reading poll(CoordinatorClient& client, const std::string& id, JobWatcher& watcher,
             std::optional<v1::Job>& last) {
  v1::Job job;
  Reading reading;
  reading.status = client.get_job(id, job);
  if (reading.status.ok()) {
    reading.heard = true;
    watcher.show(job);
    last = job;
  }
  return reading;
}

// Sleeps `duration` in short slices; returns the stop reason if one came up.
std::string pause(Clock::duration duration, const FollowOptions& options) {
  const Clock::time_point until = Clock::now() + duration;
  while (Clock::now() < until) {
    if (options.stop_reason) {
      std::string reason = options.stop_reason();
      if (!reason.empty()) return reason;
    }
    std::this_thread::sleep_for(
        std::min<Clock::duration>(std::chrono::milliseconds(100), until - Clock::now()));
  }
  return "";
}

// The outcome line and the summary, in the form asked for.
void print_outcome(const v1::Job& job, const FollowOptions& options, std::ostream& out,
                   std::ostream& err) {
  std::string line = "job " + job.id() + " (" + job.name() + ") " + state_name(job.state()) +
                     " at step " + std::to_string(job.progress().step()) + "/" +
                     std::to_string(job.progress().steps()) + ", attempt " +
                     std::to_string(job.attempt());
  if (job.restarts() > 0) line += ", " + std::to_string(job.restarts()) + " restart(s)";
  if (!job.message().empty()) line += ": " + job.message();
  const nlohmann::ordered_json summary = parse_summary(job.summary_json());
  if (options.format == OutputFormat::kJson) {
    err << line << "\n";
    if (!summary.is_null()) out << summary.dump(2) << "\n";
    return;
  }
  out << line << "\n";
  print_summary_table(summary, out);
}

}  // namespace

FollowResult follow_job(CoordinatorClient& client, const std::string& id,
                        const FollowOptions& options, std::ostream& out, std::ostream& err) {
  const bool json = options.format == OutputFormat::kJson;
  JobWatcher watcher(json ? err : out, options.terminal && !json);
  FollowResult result;
  // Ends the follow early, saying why.
  const auto stop = [&](const std::string& reason) {
    watcher.finish();
    err << "mixtrain: " << reason << "\n";
    result.exit_code = kExitJobFailed;
    return result;
  };
  bool use_watch = true;
  net::Backoff backoff = reconnect_backoff(options.give_up_after);
  while (!result.job || !is_final(result.job->state())) {
    const Reading reading = use_watch ? watch(client, id, watcher, result.job, options)
                                      : poll(client, id, watcher, result.job);
    if (!reading.stop_reason.empty()) return stop(reading.stop_reason);
    if (reading.heard) backoff.reset();
    if (result.job && is_final(result.job->state())) break;
    const grpc::StatusCode code = reading.status.error_code();
    if (use_watch && code == grpc::StatusCode::UNIMPLEMENTED) {
      use_watch = false;
      continue;
    }
    Clock::duration wait = std::chrono::seconds(1);  // polling, or a stream that ended early
    if (!reading.status.ok()) {
      if (is_transient(code) && backoff.connected()) {
        watcher.note("lost the coordinator at " + client.address() + " (" +
                     reading.status.error_message() + "), reconnecting");
        watcher.note_next_update("reconnected to the coordinator at " + client.address());
      }
      const std::optional<net::Backoff::Duration> next =
          is_transient(code) ? backoff.next() : std::nullopt;
      if (!next) {
        watcher.finish();
        result.exit_code = client.report(reading.status, id, err);
        return result;
      }
      wait = *next;
    }
    const std::string reason = pause(wait, options);
    if (!reason.empty()) return stop(reason);
  }
  // The stream's last update may predate the summary and the event list.
  poll(client, id, watcher, result.job);
  watcher.finish();
  print_outcome(*result.job, options, out, err);
  result.exit_code = result.job->state() == v1::JOB_STATE_SUCCEEDED ? kExitOk : kExitJobFailed;
  return result;
}

}  // namespace mixtrain::cli
