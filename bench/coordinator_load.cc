// Why: issue 5 asks what the coordinator costs under load: 500 job
// submissions from 8 concurrent clients (every other one cancelled right
// away, the rest left queued since no worker is registered), each of which
// must be recorded exactly once, with the submit latency's p50/p99 and the
// coordinator's peak resident memory. It runs the real `mixtrain-coordinator`
// binary on a free port with a throwaway database.
//
//   coordinator_load BIN_DIR [--clients 8] [--jobs 500]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/coordinator_process.h"
#include "net/grpc_channel.h"
#include "proto/mixtrain.grpc.pb.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using mixtrain::bench::kClientToken;
using mixtrain::bench::percentile;

constexpr char kSpec[] = R"(version: 1
name: load
model: {arch: gpt, layers: 1, heads: 2, dim: 32, seq_len: 16, vocab: 256}
data: {train: "builtin:demo", val_fraction: 0.1}
train: {steps: 10, warmup_steps: 2}
resources: {workers: 1}
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: coordinator_load BIN_DIR [--clients N] [--jobs N]\n";
    return 2;
  }
  int clients = 8;
  int jobs = 500;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--clients") clients = std::stoi(argv[i + 1]);
    if (flag == "--jobs") jobs = std::stoi(argv[i + 1]);
  }
  const fs::path work = fs::temp_directory_path() / ("mixtrain-load-" + std::to_string(getpid()));
  int exit_code = 0;
  {
    mixtrain::bench::CoordinatorProcess coordinator(argv[1], work, work / "load.db");
    if (!coordinator.ok()) {
      std::cerr << "coordinator_load: " << coordinator.error();
      fs::remove_all(work);
      return 1;
    }
    auto channel = mixtrain::net::make_coordinator_channel(coordinator.address());
    auto stub = mixtrain::v1::JobService::NewStub(*channel);
    std::mutex mu;
    std::vector<double> latencies_ms;
    std::vector<std::string> ids;
    int errors = 0;
    std::string first_error;
    const auto started = Clock::now();
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&, c] {
        for (int j = c; j < jobs; j += clients) {
          mixtrain::v1::SubmitJobRequest request;
          request.set_spec_yaml(kSpec);
          mixtrain::v1::SubmitJobResponse response;
          grpc::ClientContext context;
          mixtrain::net::prepare_call(context, kClientToken, std::chrono::seconds(30));
          const auto begin = Clock::now();
          const grpc::Status status = stub->SubmitJob(&context, request, &response);
          const double ms = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
          bool cancelled = true;
          if (status.ok() && j % 2 == 0) {
            mixtrain::v1::CancelJobRequest cancel;
            cancel.set_id(response.id());
            mixtrain::v1::Job job;
            grpc::ClientContext cancel_context;
            mixtrain::net::prepare_call(cancel_context, kClientToken, std::chrono::seconds(30));
            cancelled = stub->CancelJob(&cancel_context, cancel, &job).ok();
          }
          std::lock_guard lock(mu);
          if (!status.ok() || !cancelled) {
            if (errors++ == 0) first_error = status.error_message();
            continue;
          }
          latencies_ms.push_back(ms);
          ids.push_back(response.id());
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();

    mixtrain::v1::ListJobsResponse listed;
    grpc::ClientContext context;
    mixtrain::net::prepare_call(context, kClientToken, std::chrono::seconds(30));
    const grpc::Status status = stub->ListJobs(&context, {}, &listed);
    std::map<std::string, int> recorded;
    std::map<int, int> by_state;
    for (const auto& job : listed.jobs()) {
      ++recorded[job.id()];
      ++by_state[job.state()];
    }
    int missing = 0, duplicated = 0;
    for (const std::string& id : ids) missing += recorded.count(id) == 0;
    for (const auto& [id, count] : recorded) duplicated += count > 1;
    const long long rss = coordinator.peak_rss_bytes();
    std::printf("%d submissions from %d clients in %.2f s (%.0f/s), %d errors%s\n", jobs, clients,
                seconds, jobs / seconds, errors,
                errors == 0 ? "" : (", the first: " + first_error).c_str());
    std::printf("submit latency: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
                percentile(latencies_ms, 0.50), percentile(latencies_ms, 0.99),
                percentile(latencies_ms, 1.0));
    std::printf("recorded: %d jobs (%d queued, %d cancelled), %d missing, %d duplicated\n",
                listed.jobs_size(), by_state[mixtrain::v1::JOB_STATE_QUEUED],
                by_state[mixtrain::v1::JOB_STATE_CANCELLED], missing, duplicated);
    std::printf("coordinator peak RSS: %.1f MiB\n", rss / 1048576.0);
    if (!status.ok() || errors != 0 || missing != 0 || duplicated != 0 ||
        listed.jobs_size() != jobs) {
      std::cerr << "coordinator_load: not every submission was recorded exactly once\n";
      exit_code = 1;
    }
  }
  fs::remove_all(work);
  return exit_code;
}
