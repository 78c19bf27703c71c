// Why: see job_commands.h.
#include "client/job_commands.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "client/job_view.h"
#include "client/text_table.h"

namespace mixtrain::cli {
namespace {

// The workers by rank, each with the device it trains on: "w-1 (cuda:0)".
std::vector<std::string> rank_workers(const v1::Job& job) {
  std::vector<std::string> out;
  for (int rank = 0; rank < job.workers_size(); ++rank) {
    std::string entry = job.workers(rank);
    if (rank < job.devices_size() && !job.devices(rank).empty()) {
      entry += " (" + job.devices(rank) + ")";
    }
    out.push_back(std::move(entry));
  }
  return out;
}

// "hh:mm:ss" in local time, for the event history.
std::string clock_time(int64_t unix_ms) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[16];
  std::strftime(text, sizeof(text), "%H:%M:%S", &local);
  return text;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out.empty() ? "-" : out;
}

void print_status_table(const v1::Job& job, std::ostream& out) {
  const v1::Progress& p = job.progress();
  char progress[256];
  if (p.step() == 0) {
    std::snprintf(progress, sizeof(progress), "0/%lld steps", static_cast<long long>(p.steps()));
  } else {
    std::snprintf(progress, sizeof(progress),
                  "step %lld/%lld  loss %.4f  val loss %.4f  scale %g  overflows %lld  %.0f tok/s",
                  static_cast<long long>(p.step()), static_cast<long long>(p.steps()),
                  p.train_loss(), p.val_loss(), p.loss_scale(),
                  static_cast<long long>(p.overflow_steps()), p.tokens_per_second());
  }
  out << "id        " << job.id() << "\n"
      << "name      " << job.name() << "\n"
      << "state     " << state_name(job.state()) << "\n"
      << "attempt   " << job.attempt() << " (" << job.restarts() << " restarts)\n"
      << "progress  " << progress << "\n"
      << "workers   " << join(rank_workers(job)) << "\n";
  if (!job.configuration().empty()) out << "auto      " << job.configuration() << "\n";
  out << "message   " << (job.message().empty() ? "-" : job.message()) << "\n"
      << "age       " << format_age(job.created_unix_ms()) << "\n";
  if (job.events_size() > 0) out << "events\n";
  for (const v1::JobEvent& event : job.events()) {
    out << "  " << clock_time(event.unix_ms()) << "  " << state_name(event.state());
    if (!event.message().empty()) out << "  " << event.message();
    out << "\n";
  }
  print_summary_table(parse_summary(job.summary_json()), out);
}

}  // namespace

int run_jobs_command(CoordinatorClient& client, bool all, OutputFormat format, std::ostream& out,
                     std::ostream& err) {
  constexpr int kPageJobs = 1000;  // the most a page holds
  std::vector<v1::Job> jobs;       // newest first, as the pages come
  v1::ListJobsRequest request;
  request.set_page_size(all ? kPageJobs : kRecentJobs);
  bool more = true;
  while (more) {
    v1::ListJobsResponse response;
    const grpc::Status status = client.call(&v1::JobService::Stub::ListJobs, request, response);
    if (!status.ok()) return client.report(status, "", err);
    for (v1::Job& job : *response.mutable_jobs()) {
      if (all || int(jobs.size()) < kRecentJobs) jobs.push_back(std::move(job));
    }
    more = !response.next_page_token().empty();
    if (!all && int(jobs.size()) >= kRecentJobs) break;
    request.set_page_token(response.next_page_token());
  }
  std::reverse(jobs.begin(), jobs.end());  // oldest first
  if (format == OutputFormat::kJson) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const v1::Job& job : jobs) list.push_back(job_json(job, false));
    out << list.dump(2) << "\n";
    return kExitOk;
  }
  TextTable table({"ID", "NAME", "STATE", "PRIORITY", "ATTEMPT", "STEP/STEPS", "AGE", "MESSAGE"});
  for (const v1::Job& job : jobs) {
    table.add_row(
        {job.id(), job.name(), state_name(job.state()), std::to_string(job.priority()),
         std::to_string(job.attempt()),
         std::to_string(job.progress().step()) + "/" + std::to_string(job.progress().steps()),
         format_age(job.created_unix_ms()), trim_cell(job.message(), 48)});
  }
  table.print(out);
  if (more) {
    err << "(the " << jobs.size() << " most recent jobs; `mixtrain jobs --all` lists every one)\n";
  }
  return kExitOk;
}

int run_status_command(CoordinatorClient& client, const std::string& id, OutputFormat format,
                       std::ostream& out, std::ostream& err) {
  v1::Job job;
  const grpc::Status status = client.get_job(id, job);
  if (!status.ok()) return client.report(status, id, err);
  if (format == OutputFormat::kJson) {
    out << job_json(job, true).dump(2) << "\n";
  } else {
    print_status_table(job, out);
  }
  return kExitOk;
}

int run_cancel_command(CoordinatorClient& client, const std::string& id, OutputFormat format,
                       std::ostream& out, std::ostream& err) {
  v1::CancelJobRequest request;
  request.set_id(id);
  v1::Job job;
  const grpc::Status status = client.call(&v1::JobService::Stub::CancelJob, request, job);
  if (!status.ok()) return client.report(status, id, err);
  if (format == OutputFormat::kJson) {
    out << job_json(job, false).dump(2) << "\n";
  } else {
    out << job.id() << " " << state_name(job.state()) << "\n";
  }
  return kExitOk;
}

}  // namespace mixtrain::cli
