// Why: issue 15 asks that the scheduler's cost grow with the queue, not
// with history, and issue 29 that a long queue not slow every pass (3,000
// queued jobs with 64 KiB specs once cost 0.40 s of CPU per pass). This
// runs the real `mixtrain-coordinator` three times: on an empty database,
// on one holding --finished finished jobs (each with its events), and on
// one holding --queued queued jobs with 60 KB specs, asking for more
// workers than there are (so they wait throughout; added once the workers
// registered), with --workers fake workers registered through the real
// gRPC API (the tests' FakeWorker: they register, stream tasks and
// heartbeat, and report each task succeeded as soon as it starts). In
// each it measures
//   * schedule latency: SubmitJob returning -> a worker holding the task,
//     over --jobs one-rank jobs submitted one after another;
//   * the latency of those SubmitJob calls themselves, and of as many
//     ListJobs calls (one page, as `mixtrain jobs` asks) after them;
//   * the CPU of one scheduler pass (liveness, placement, starts), from the
//     coordinator's mixtrain_scheduler_pass_cpu_seconds over an idle
//     window, and the coordinator's whole CPU in that window;
// and prints both runs side by side with the ratio.
//
//   scheduler_scale BIN_DIR [--finished 100000] [--queued 10000] [--workers 200]
//                   [--jobs 40]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "bench/coordinator_process.h"
#include "engine/common/json.h"
#include "engine/config/job_spec_json.h"
#include "engine/train/train_summary.h"
#include "jobspec/job_spec_yaml.h"
#include "net/grpc_channel.h"
#include "server/job_database.h"
#include "server/sqlite_db.h"
#include "tests/unit/net/http_get.h"
#include "tests/unit/server/fake_worker.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using mixtrain::bench::CoordinatorProcess;
using mixtrain::server::testing_support::FakeWorker;
namespace v1 = mixtrain::v1;

constexpr char kSpec[] = R"(name: scale
data: {train: "builtin:demo"}
train: {steps: 10, warmup_steps: 2}
resources: {workers: 1}
)";

// A database holding `finished` cancelled jobs with one event each, as the
// coordinator's own schema lays them out.
bool make_history(const fs::path& db, int64_t finished) {
  if (!mixtrain::server::JobDatabase::open(db.string()).ok()) return false;
  auto opened = mixtrain::server::SqliteDb::open(db.string());
  if (!opened.ok()) return false;
  mixtrain::server::SqliteDb& sql = **opened;
  const std::string count = std::to_string(finished);
  const std::string rows =
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " + count + ") ";
  return sql.exec("BEGIN").ok() &&
         sql.exec((rows +
                   "INSERT INTO jobs(id, name, state, spec_yaml, steps, attempt, message, "
                   "created_ms, updated_ms) SELECT printf('old%012d', i), 'old', " +
                   std::to_string(v1::JOB_STATE_CANCELLED) + ", '" + kSpec +
                   "', 10, 0, 'cancelled', i, i FROM n")
                      .c_str())
             .ok() &&
         sql.exec(
                "INSERT INTO events(job_id, unix_ms, state, message) SELECT id, created_ms, "
                "state, 'cancelled' FROM jobs")
             .ok() &&
         sql.exec("COMMIT").ok();
}

// A database holding one QUEUED job with a 60 KB spec (kSpec and a
// comment) and its needs stored as at submit, asking for
// `more_than_workers` + 1 workers: what add_queue copies.
bool make_queued_job(const fs::path& db, int more_than_workers) {
  const std::string yaml = std::string(kSpec) + "#" + std::string(60'000, '.') + "\n";
  const mixtrain::jobspec::JobSpecResult parsed = mixtrain::jobspec::parse_job_spec(yaml, "q.yaml");
  if (!parsed.ok()) return false;
  mixtrain::server::JobNeeds needs = mixtrain::server::job_needs(*parsed.spec);
  needs.workers = more_than_workers + 1;
  const std::string spec_json =
      mixtrain::dump_json(mixtrain::config::job_spec_to_json(*parsed.spec));
  auto store = mixtrain::server::JobDatabase::open(db.string());
  return store.ok() && (*store)->create_job("queued", yaml, spec_json, 10, needs).ok();
}

// Adds `count` copies of that job to the database, in one transaction
// (while the coordinator runs: it sees them at its next pass).
bool add_queue(const fs::path& db, int64_t count) {
  auto opened = mixtrain::server::SqliteDb::open(db.string());
  if (!opened.ok()) return false;
  mixtrain::server::SqliteDb& sql = **opened;
  if (!sql.exec("BEGIN; CREATE TEMP TABLE one AS SELECT * FROM jobs WHERE name = 'queued';").ok())
    return false;
  for (int64_t i = 1; i <= count; ++i) {
    const std::string copy = "UPDATE one SET id = printf('queued%09d', " + std::to_string(i) +
                             "); INSERT INTO jobs SELECT * FROM one;";
    if (!sql.exec(copy.c_str()).ok()) return false;
  }
  return sql.exec("COMMIT").ok();
}

// The sum and count of histogram `name` in a /metrics text.
std::pair<double, double> histogram_totals(const std::string& metrics, const std::string& name) {
  std::pair<double, double> totals{0, 0};
  std::smatch match;
  if (std::regex_search(metrics, match, std::regex("\n" + name + "_sum ([0-9.e+-]+)"))) {
    totals.first = std::stod(match[1]);
  }
  if (std::regex_search(metrics, match, std::regex("\n" + name + "_count ([0-9]+)"))) {
    totals.second = std::stod(match[1]);
  }
  return totals;
}

struct RunResult {
  bool ok = false;
  double latency_p50_ms = 0, latency_p99_ms = 0;
  double submit_p50_ms = 0, submit_p99_ms = 0;  // the SubmitJob call
  double list_p50_ms = 0, list_p99_ms = 0;      // a ListJobs call
  double pass_cpu_us = 0;        // mean CPU of one scheduler pass while idle
  double passes_per_second = 0;  // while idle
  double coordinator_cpu = 0;    // share of one core while idle, heartbeats included
  double seconds_to_open = 0;    // start to serving (migrations included)
};

RunResult run(const fs::path& bin_dir, const fs::path& work, int64_t finished, int64_t queued,
              int workers, int jobs) {
  RunResult result;
  if (finished > 0 && !make_history(work / "jobs.db", finished)) {
    std::cerr << "scheduler_scale: cannot write " << finished << " finished jobs\n";
    return result;
  }
  if (queued > 0 && !make_queued_job(work / "jobs.db", workers)) {
    std::cerr << "scheduler_scale: cannot write a queued job\n";
    return result;
  }
  const auto starting = Clock::now();
  // A 2 s worker timeout: a scheduler pass every 200 ms, heartbeats every
  // 400 ms; the history (dated 1970) is kept.
  CoordinatorProcess coordinator(
      bin_dir, work, work / "jobs.db",
      {"--worker-timeout-seconds=2", "--retain-finished-days=0", "--retain-finished-jobs=0"});
  result.seconds_to_open = std::chrono::duration<double>(Clock::now() - starting).count();
  if (!coordinator.ok()) {
    std::cerr << "scheduler_scale: " << coordinator.error();
    return result;
  }
  auto channel = grpc::CreateChannel(coordinator.address(), grpc::InsecureChannelCredentials());
  std::vector<std::unique_ptr<FakeWorker>> fleet;
  for (int i = 0; i < workers; ++i) {
    fleet.push_back(
        std::make_unique<FakeWorker>(channel, mixtrain::bench::kJoinToken, FakeWorker::Options{}));
  }
  // The queue arrives once the workers are in: each registration changes
  // what every waiting job's message says ("only N registered").
  if (queued > 1 && !add_queue(work / "jobs.db", queued - 1)) {
    std::cerr << "scheduler_scale: cannot write " << queued << " queued jobs\n";
    return result;
  }
  auto jobs_stub = v1::JobService::NewStub(channel);
  mixtrain::TrainSummary summary;
  summary.name = "scale";
  summary.status = "succeeded";
  summary.ranks.push_back({});
  const std::string summary_json = mixtrain::dump_json(summary.to_json());

  // One job at a time: the idle worker holding it reports it done at once.
  const auto ms_since = [](Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  };
  std::vector<double> latencies_ms;
  std::vector<double> submit_ms;
  for (int j = 0; j < jobs; ++j) {
    v1::SubmitJobRequest request;
    request.set_spec_yaml(kSpec);
    v1::SubmitJobResponse response;
    grpc::ClientContext context;
    mixtrain::net::prepare_call(context, mixtrain::bench::kClientToken, std::chrono::seconds(30));
    const auto calling = Clock::now();
    if (!jobs_stub->SubmitJob(&context, request, &response).ok()) return result;
    submit_ms.push_back(ms_since(calling));
    const auto submitted = Clock::now();
    bool started = false;
    while (!started && Clock::now() - submitted < std::chrono::seconds(30)) {
      for (auto& worker : fleet) {
        const std::optional<v1::TaskCommand> command = worker->next(std::chrono::milliseconds(0));
        if (!command || !command->has_start()) continue;
        latencies_ms.push_back(ms_since(submitted));
        worker->report(command->start(), v1::TASK_OUTCOME_SUCCEEDED, "", summary_json, 10);
        started = true;
        break;
      }
      if (!started) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (!started) {
      std::cerr << "scheduler_scale: job " << response.id() << " never started\n";
      return result;
    }
  }
  std::vector<double> list_ms;
  for (int j = 0; j < jobs; ++j) {
    v1::ListJobsRequest request;
    v1::ListJobsResponse response;
    grpc::ClientContext context;
    mixtrain::net::prepare_call(context, mixtrain::bench::kClientToken, std::chrono::seconds(30));
    const auto calling = Clock::now();
    if (!jobs_stub->ListJobs(&context, request, &response).ok()) return result;
    list_ms.push_back(ms_since(calling));
  }
  result.latency_p50_ms = mixtrain::bench::percentile(latencies_ms, 0.5);
  result.latency_p99_ms = mixtrain::bench::percentile(latencies_ms, 0.99);
  result.submit_p50_ms = mixtrain::bench::percentile(submit_ms, 0.5);
  result.submit_p99_ms = mixtrain::bench::percentile(submit_ms, 0.99);
  result.list_p50_ms = mixtrain::bench::percentile(list_ms, 0.5);
  result.list_p99_ms = mixtrain::bench::percentile(list_ms, 0.99);

  // Idle: every worker heartbeating, nothing queued but the jobs that wait.
  const auto scrape = [&] {
    return mixtrain::net::testing_support::http_get(coordinator.http_port(), "/metrics");
  };
  constexpr double kWindow = 20.0;
  const auto before = histogram_totals(scrape(), "mixtrain_scheduler_pass_cpu_seconds");
  const double cpu_before = coordinator.cpu_seconds();
  std::this_thread::sleep_for(std::chrono::duration<double>(kWindow));
  const auto after = histogram_totals(scrape(), "mixtrain_scheduler_pass_cpu_seconds");
  const double passes = after.second - before.second;
  result.pass_cpu_us = passes > 0 ? (after.first - before.first) / passes * 1e6 : 0;
  result.passes_per_second = passes / kWindow;
  result.coordinator_cpu = (coordinator.cpu_seconds() - cpu_before) / kWindow;
  result.ok = passes > 0;
  // Each worker stops its heartbeat thread (sleeping up to a beat); all at once.
  std::vector<std::thread> stopping;
  for (auto& worker : fleet) stopping.emplace_back([&worker] { worker.reset(); });
  for (std::thread& thread : stopping) thread.join();
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: scheduler_scale BIN_DIR [--finished N] [--queued N] [--workers N] "
                 "[--jobs N]\n";
    return 2;
  }
  int64_t finished = 100'000;
  int64_t queued = 10'000;
  int workers = 200;
  int jobs = 40;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--finished") finished = std::stoll(argv[i + 1]);
    if (flag == "--queued") queued = std::stoll(argv[i + 1]);
    if (flag == "--workers") workers = std::stoi(argv[i + 1]);
    if (flag == "--jobs") jobs = std::stoi(argv[i + 1]);
  }
  const fs::path work = fs::temp_directory_path() / ("mixtrain-scale-" + std::to_string(getpid()));
  std::vector<RunResult> results;
  const std::pair<int64_t, int64_t> databases[] = {{0, 0}, {finished, 0}, {0, queued}};
  for (const auto& [history, waiting] : databases) {
    const fs::path dir = work / (std::to_string(history) + "-" + std::to_string(waiting));
    fs::create_directories(dir);
    results.push_back(run(argv[1], dir, history, waiting, workers, jobs));
  }
  fs::remove_all(work);
  if (!results[0].ok || !results[1].ok || !results[2].ok) return 1;
  std::printf("%d workers registered, %d one-rank jobs submitted one at a time\n", workers, jobs);
  std::printf("%-34s %10s %12s %8s %12s %8s\n", "the database holds", "nothing",
              (std::to_string(finished) + " ended").c_str(), "ratio",
              (std::to_string(queued) + " queued").c_str(), "ratio");
  const auto row = [&](const char* what, double RunResult::*field) {
    const double empty = results[0].*field, full = results[1].*field, queue = results[2].*field;
    std::printf("%-34s %10.3f %12.3f %8.2f %12.3f %8.2f\n", what, empty, full,
                empty > 0 ? full / empty : 0.0, queue, empty > 0 ? queue / empty : 0.0);
  };
  row("schedule latency p50 (ms)", &RunResult::latency_p50_ms);
  row("schedule latency p99 (ms)", &RunResult::latency_p99_ms);
  row("SubmitJob call p50 (ms)", &RunResult::submit_p50_ms);
  row("SubmitJob call p99 (ms)", &RunResult::submit_p99_ms);
  row("ListJobs call p50 (ms)", &RunResult::list_p50_ms);
  row("ListJobs call p99 (ms)", &RunResult::list_p99_ms);
  row("CPU per scheduler pass (us)", &RunResult::pass_cpu_us);
  row("scheduler passes per second", &RunResult::passes_per_second);
  row("coordinator CPU while idle (cores)", &RunResult::coordinator_cpu);
  row("start to serving (s)", &RunResult::seconds_to_open);
  return 0;
}
