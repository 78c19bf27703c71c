// Why: what the coordinator promises beyond scheduling: a restarted
// coordinator lets running jobs continue when their workers come back (and
// requeues them when one does not), submitted specs only name files inside
// the data root, WatchJob and StreamLogs follow a job to its end, the HTTP
// endpoints show metrics and live workers, and TLS works end to end.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cluster_fixture.h"
#include "net/http_get.h"

namespace mixtrain::server {
namespace {

using net::testing_support::http_body;
using testing_support::call_context;
using testing_support::ClusterTest;
using testing_support::FakeWorker;
using testing_support::kClientToken;
using testing_support::kJoinToken;
using testing_support::spec;

class RestartTest : public ClusterTest {
 protected:
  // A 2-rank job started on two workers, then the coordinator stopped and
  // started again on the same database (the workers silent meanwhile).
  struct Before {
    std::string job_id;
    std::string worker_ids[2];
    std::string worker_secrets[2];
    v1::Task tasks[2];
  };
  Before run_two_ranks_then_restart(const std::string& job_spec = spec(2)) {
    Before before;
    {
      auto first = worker();
      auto second = worker();
      before.job_id = submit(job_spec);
      before.tasks[0] = first->next_start();
      before.tasks[1] = second->next_start();
      before.worker_ids[0] = first->id();
      before.worker_ids[1] = second->id();
      before.worker_secrets[0] = first->secret();
      before.worker_secrets[1] = second->secret();
      await_state(before.job_id, v1::JOB_STATE_RUNNING);
      first->stop_heartbeats();
      second->stop_heartbeats();
      server_->shutdown();
    }
    start();
    return before;
  }
};

// Issue 17: a job preempted when the coordinator stopped is PREEMPTED
// again after it restarts; its ranks, back, report that they stopped,
// and it requeues without a restart spent while the job it made room
// for starts.
TEST_F(RestartTest, APreemptionInProgressCompletesAfterARestart) {
  std::string low, high, worker_id, worker_secret;
  v1::Task task;
  {
    auto only = worker();
    low = submit(spec(1, 0, "auto", "low"));
    task = only->next_start();
    high = submit(spec(1, 0, "auto", "high") + "scheduling: {priority: 2}\n");
    const std::optional<v1::TaskCommand> preempt = only->next();
    ASSERT_TRUE(preempt && preempt->has_preempt());
    await_state(low, v1::JOB_STATE_PREEMPTED);
    worker_id = only->id();
    worker_secret = only->secret();
    only->stop_heartbeats();
    server_->shutdown();
  }
  start();
  EXPECT_EQ(job(low).state(), v1::JOB_STATE_PREEMPTED);
  auto back = worker({.previous_worker_id = worker_id,
                      .previous_worker_secret = worker_secret,
                      .running = {v1::running_of(task)}});
  ASSERT_TRUE(back->report(task, v1::TASK_OUTCOME_PREEMPTED, "", "", 3).ok());
  EXPECT_EQ(back->next_start().job_id(), high);
  const v1::Job requeued = job(low);
  EXPECT_EQ(requeued.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(requeued.restarts(), 0);
}

TEST_F(RestartTest, RunningJobContinuesWhenItsWorkersComeBack) {
  const Before before = run_two_ranks_then_restart();
  const std::string& job_id = before.job_id;
  const v1::Task* tasks = before.tasks;
  EXPECT_EQ(job(job_id).state(), v1::JOB_STATE_RUNNING);
  auto first = worker({.previous_worker_id = before.worker_ids[0],
                       .previous_worker_secret = before.worker_secrets[0],
                       .running = {v1::running_of(tasks[0])}});
  auto second = worker({.previous_worker_id = before.worker_ids[1],
                        .previous_worker_secret = before.worker_secrets[1],
                        .running = {v1::running_of(tasks[1])}});
  EXPECT_EQ(first->id(), before.worker_ids[0]);
  // Past the grace period the attempt still runs, nothing was resent.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(job(job_id).state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job(job_id).attempt(), 1);
  EXPECT_FALSE(first->next(std::chrono::milliseconds(10)).has_value());
  ASSERT_TRUE(first->report(tasks[0], v1::TASK_OUTCOME_SUCCEEDED, "", "{}").ok());
  ASSERT_TRUE(second->report(tasks[1], v1::TASK_OUTCOME_SUCCEEDED, "", "{}").ok());
  await_state(job_id, v1::JOB_STATE_SUCCEEDED);
}

// The bytes of `path` ("" when absent).
std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Issue 29: after a restart, anyone with the join token could register
// with a running worker's id (from /sd/workers) and any secret, and take
// its next task. The secrets' hashes outlive the restart now.
TEST_F(RestartTest, AWorkersIdCannotBeTakenAfterARestart) {
  const Before before = run_two_ranks_then_restart();
  auto stub = v1::WorkerService::NewStub(channel_);
  v1::RegisterRequest takeover;
  takeover.set_hostname("attacker");
  takeover.set_previous_worker_id(before.worker_ids[0]);
  *takeover.add_running() = v1::running_of(before.tasks[0]);
  for (const std::string& guess : {std::string(), std::string("any-secret")}) {
    takeover.set_previous_worker_secret(guess);
    v1::RegisterResponse response;
    const grpc::Status status = stub->Register(call_context(kJoinToken).get(), takeover, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << "'" << guess << "': " << status.error_message();
  }
  // An id this coordinator never gave is not handed out either.
  takeover.set_previous_worker_id("w-made-up");
  takeover.clear_running();
  v1::RegisterResponse fresh;
  ASSERT_TRUE(stub->Register(call_context(kJoinToken).get(), takeover, &fresh).ok());
  EXPECT_NE(fresh.worker_id(), "w-made-up");
  // The real worker still comes back under its id, and the job goes on.
  auto first = worker({.previous_worker_id = before.worker_ids[0],
                       .previous_worker_secret = before.worker_secrets[0],
                       .running = {v1::running_of(before.tasks[0])}});
  EXPECT_EQ(first->id(), before.worker_ids[0]);
  // Only hashes are stored.
  const std::string stored =
      file_bytes(dir_.path("jobs.db")) + file_bytes(dir_.path("jobs.db-wal"));
  EXPECT_EQ(stored.find(before.worker_secrets[0]), std::string::npos);
  EXPECT_NE(stored.find(sha256_hex(before.worker_secrets[0])), std::string::npos);
}

TEST_F(RestartTest, RanksThatEndedWhileTheCoordinatorWasDownStillCount) {
  const Before before = run_two_ranks_then_restart();
  // Both come back running nothing and deliver the outcomes they kept.
  auto first = worker({.previous_worker_id = before.worker_ids[0],
                       .previous_worker_secret = before.worker_secrets[0]});
  auto second = worker({.previous_worker_id = before.worker_ids[1],
                        .previous_worker_secret = before.worker_secrets[1]});
  ASSERT_TRUE(first->report(before.tasks[0], v1::TASK_OUTCOME_SUCCEEDED, "", "{}").ok());
  ASSERT_TRUE(second->report(before.tasks[1], v1::TASK_OUTCOME_SUCCEEDED, "", "{}").ok());
  const v1::Job done = await_state(before.job_id, v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(done.attempt(), 1);
  EXPECT_EQ(done.restarts(), 0);
}

TEST_F(RestartTest, RunningJobIsRequeuedWhenAWorkerDoesNotComeBack) {
  const Before before = run_two_ranks_then_restart(spec(2, /*max_restarts=*/1));
  auto back = worker({.previous_worker_id = before.worker_ids[0],
                      .previous_worker_secret = before.worker_secrets[0],
                      .running = {v1::running_of(before.tasks[0])}});
  const std::optional<v1::TaskCommand> cancel = back->next(std::chrono::seconds(10));
  ASSERT_TRUE(cancel.has_value() && cancel->has_cancel());
  EXPECT_EQ(cancel->cancel().attempt(), 1);
  const v1::Job requeued = await_state(before.job_id, v1::JOB_STATE_QUEUED);
  EXPECT_EQ(requeued.restarts(), 1);
  const std::string cause = last_event_message(before.job_id, v1::JOB_STATE_QUEUED);
  EXPECT_NE(cause.find("did not come back after the coordinator restarted"), std::string::npos)
      << cause;
}

struct PathCase {
  const char* label;
  std::string yaml_tail;  // after "name: t\n"
  const char* expected;   // in the error; nullptr: accepted
};

void PrintTo(const PathCase& c, std::ostream* out) { *out << c.label; }

class SpecPathTest : public ClusterTest, public testing::WithParamInterface<PathCase> {};

TEST_P(SpecPathTest, OnlyFilesInsideTheDataRootAreAccepted) {
  const std::filesystem::path root = dir_.path();
  std::filesystem::create_directories(root / "data");
  dir_.write("data/train.txt", "hello");
  dir_.write("secret.txt", "no");
  std::filesystem::create_symlink("/etc/hostname", root / "data" / "out.txt");
  std::filesystem::create_symlink(root / "data" / "train.txt", root / "data" / "in.txt");
  CoordinatorOptions narrow = options();
  narrow.data_root = (root / "data").string();
  start(narrow);
  v1::SubmitJobRequest request;
  request.set_spec_yaml("name: t\n" + GetParam().yaml_tail);
  v1::SubmitJobResponse response;
  const grpc::Status status =
      jobs_->SubmitJob(call_context(kClientToken).get(), request, &response);
  if (GetParam().expected == nullptr) {
    EXPECT_TRUE(status.ok()) << status.error_message();
  } else {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find(GetParam().expected), std::string::npos)
        << status.error_message();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Paths, SpecPathTest,
    testing::Values(
        PathCase{"relative_file", "data: {train: train.txt}\n", nullptr},
        PathCase{"symlink_inside", "data: {train: in.txt, val: ./train.txt}\n", nullptr},
        PathCase{"builtin", "data: {train: builtin:demo}\n", nullptr},
        PathCase{"absolute", "data: {train: /etc/hostname}\n", "data.train: '/etc/hostname'"},
        PathCase{"dotdot", "data: {train: ../secret.txt}\n",
                 "data.train: '../secret.txt' points outside"},
        PathCase{"symlink_out", "data: {train: out.txt}\n", "data.train: 'out.txt' points outside"},
        PathCase{"missing", "data: {train: nope.txt}\n", "data.train: 'nope.txt' is not a file"},
        PathCase{"val", "data: {train: train.txt, val: ../x}\n", "data.val"},
        PathCase{"init_from", "data: {train: train.txt}\nmodel: {init_from: /m.safetensors}\n",
                 "model.init_from"},
        PathCase{"checkpoint_dir", "data: {train: train.txt}\ncheckpoint: {dir: ck}\n",
                 "checkpoint.dir: set by the coordinator under --checkpoint-root"}),
    [](const testing::TestParamInfo<PathCase>& info) { return info.param.label; });

using StreamTest = ClusterTest;

TEST_F(StreamTest, WatchJobSeesQueuedRunningSucceeded) {
  const std::string id = submit(spec(1));
  v1::WatchJobRequest request;
  request.set_id(id);
  auto context = call_context(kClientToken);
  auto reader = jobs_->WatchJob(context.get(), request);
  v1::JobUpdate update;
  ASSERT_TRUE(reader->Read(&update));
  EXPECT_EQ(update.job().state(), v1::JOB_STATE_QUEUED);
  auto w = worker();
  const v1::Task task = w->next_start();
  ASSERT_TRUE(w->report(task, v1::TASK_OUTCOME_SUCCEEDED, "", "{}").ok());
  // Message changes while it waits are updates too; each state shows once.
  std::vector<v1::JobState> states{update.job().state()};
  while (reader->Read(&update)) {
    if (states.back() != update.job().state()) states.push_back(update.job().state());
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(states, (std::vector<v1::JobState>{v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING,
                                               v1::JOB_STATE_SUCCEEDED}));
}

TEST_F(StreamTest, StreamLogsTailsAndFollowsUntilTheJobEnds) {
  const std::string id = submit(spec(1));
  auto w = worker();
  const v1::Task task = w->next_start();
  ASSERT_TRUE(w->log(task, {"one", "two", "three"}).ok());
  v1::StreamLogsRequest request;
  request.set_id(id);
  request.set_follow(true);
  request.set_tail_lines(2);
  auto context = call_context(kClientToken);
  auto reader = jobs_->StreamLogs(context.get(), request);
  v1::LogLine line;
  std::vector<std::string> texts;
  ASSERT_TRUE(reader->Read(&line));
  texts.push_back(line.text());
  ASSERT_TRUE(reader->Read(&line));
  texts.push_back(line.text());
  ASSERT_TRUE(w->log(task, {"four"}).ok());
  ASSERT_TRUE(reader->Read(&line));
  texts.push_back(line.text());
  EXPECT_EQ(line.attempt(), 1);
  EXPECT_EQ(line.rank(), 0);
  ASSERT_TRUE(w->report(task, v1::TASK_OUTCOME_SUCCEEDED, "", "{}").ok());
  EXPECT_FALSE(reader->Read(&line));
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(texts, (std::vector<std::string>{"two", "three", "four"}));

  // Lines of a task the worker no longer holds (or never held) are dropped.
  ASSERT_TRUE(w->log(task, {"late"}).ok());
  v1::ReportLogRequest unknown;
  unknown.set_worker_id(w->id());
  unknown.mutable_task()->set_job_id("no-such-job");
  unknown.add_lines("x");
  v1::ReportLogResponse logged;
  EXPECT_TRUE(w->stub().ReportLog(w->context().get(), unknown, &logged).ok());
  EXPECT_EQ(w->stub().ReportLog(call_context(kJoinToken).get(), unknown, &logged).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::StreamLogsRequest all;
  all.set_id(task.job_id());
  auto again = call_context(kClientToken);
  auto stored = jobs_->StreamLogs(again.get(), all);
  std::vector<std::string> kept;
  while (stored->Read(&line)) kept.push_back(line.text());
  EXPECT_TRUE(stored->Finish().ok());
  EXPECT_EQ(std::count(kept.begin(), kept.end(), "late"), 0);
}

TEST_F(StreamTest, FollowingStreamsEndWhenTheCoordinatorShutsDown) {
  const std::string id = submit(spec(1));
  v1::StreamLogsRequest request;
  request.set_id(id);
  request.set_follow(true);
  auto context = call_context(kClientToken);
  auto reader = jobs_->StreamLogs(context.get(), request);
  v1::WatchJobRequest watch;
  watch.set_id(id);
  auto watch_context = call_context(kClientToken);
  auto watcher = jobs_->WatchJob(watch_context.get(), watch);
  v1::JobUpdate update;
  ASSERT_TRUE(watcher->Read(&update));
  const auto begin = std::chrono::steady_clock::now();
  server_->shutdown();
  // Both end (after what was already on its way, e.g. the job's message
  // changing while it waits for a worker), and soon.
  v1::LogLine line;
  while (reader->Read(&line)) {
  }
  while (watcher->Read(&update)) {
  }
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(3));
}

using HttpTest = ClusterTest;

TEST_F(HttpTest, MetricsAndServiceDiscoveryShowJobsAndLiveWorkers) {
  auto exported = worker({.hostname = "gpu1", .metrics_address = "10.0.0.5:9401"});
  auto silent = worker({.hostname = "gpu2", .metrics_address = "10.0.0.6:9401"});
  auto unexported = worker({.hostname = "cpu1"});
  // Lost before any job is placed, so that the running job is on a live
  // worker and starts once.
  silent->stop_heartbeats();
  ASSERT_TRUE(eventually([&] {
    return http_body(server_->http_port(), "/metrics").find("mixtrain_workers{state=\"lost\"} 1") !=
           std::string::npos;
  }));
  const std::string id = submit(spec(1));
  submit(spec(5));
  await_state(id, v1::JOB_STATE_RUNNING);
  const std::string metrics = http_body(server_->http_port(), "/metrics");
  for (const char* expected :
       {"mixtrain_jobs{state=\"queued\"} 1", "mixtrain_jobs{state=\"running\"} 1",
        "mixtrain_jobs{state=\"failed\"} 0", "mixtrain_jobs_submitted_total 2",
        "mixtrain_job_restarts_total 0", "mixtrain_workers{state=\"idle\"} 1",
        "mixtrain_workers{state=\"busy\"} 1", "mixtrain_schedule_latency_seconds_count 1",
        "mixtrain_build_info{version=\""}) {
    EXPECT_NE(metrics.find(expected), std::string::npos) << expected << "\n" << metrics;
  }
  const nlohmann::json targets =
      nlohmann::json::parse(http_body(server_->http_port(), "/sd/workers"));
  ASSERT_EQ(targets.size(), 1u) << targets.dump();
  EXPECT_EQ(targets[0]["targets"], nlohmann::json::array({"10.0.0.5:9401"}));
  EXPECT_FALSE(targets[0]["labels"].contains("worker_id")) << targets.dump();
  EXPECT_EQ(targets[0]["labels"]["hostname"], "gpu1");
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

using TlsTest = ClusterTest;

TEST_F(TlsTest, ClientsAndWorkersTalkToATlsCoordinator) {
  const std::string d = dir_.path().string();
  const std::string commands =
      "cd '" + d +
      "' && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=test-ca "
      "-keyout ca.key -out ca.pem 2>/dev/null && "
      "openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout server.key "
      "-out server.csr 2>/dev/null && "
      "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > ext.cnf && "
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 "
      "-extfile ext.cnf -out server.pem 2>/dev/null";
  ASSERT_EQ(std::system(commands.c_str()), 0);
  CoordinatorOptions secure = options();
  secure.tls_cert_pem = read_text(d + "/server.pem");
  secure.tls_key_pem = read_text(d + "/server.key");
  start(secure);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = read_text(d + "/ca.pem");
  auto channel = grpc::CreateChannel("localhost:" + std::to_string(server_->port()),
                                     grpc::SslCredentials(ssl));
  auto worker = std::make_unique<FakeWorker>(channel, kJoinToken, FakeWorker::Options{});
  auto stub = v1::JobService::NewStub(channel);
  v1::SubmitJobRequest request;
  request.set_spec_yaml(spec(1));
  v1::SubmitJobResponse response;
  ASSERT_TRUE(stub->SubmitJob(call_context(kClientToken).get(), request, &response).ok());
  EXPECT_EQ(worker->next_start().job_id(), response.id());

  auto plain = v1::JobService::NewStub(grpc::CreateChannel(
      "localhost:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
  v1::ListJobsResponse jobs;
  EXPECT_EQ(plain->ListJobs(call_context(kClientToken).get(), {}, &jobs).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace mixtrain::server
