// Why: the agent's contract with the coordinator is a sequence of calls:
// register, open the task stream, heartbeat, run what it is told, report,
// and after a coordinator restart register again with its old id and the
// task it still runs. These tests play the coordinator with the in-test
// WorkerService and train for real in the task process.
#include "worker/agent.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <ostream>
#include <thread>

#include "test_support/temp_dir.h"
#include "test_worker_service.h"
#include "tiny_task.h"
#include "worker/resources.h"

namespace mixtrain::worker {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Polls `condition` every 20 ms for up to `timeout`.
bool eventually(const std::function<bool()>& condition, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return condition();
}

v1::TaskCommand start(const v1::Task& task) {
  v1::TaskCommand out;
  *out.mutable_start() = task;
  return out;
}

v1::TaskCommand cancel(const std::string& job_id, int attempt) {
  v1::TaskCommand out;
  out.mutable_cancel()->set_job_id(job_id);
  out.mutable_cancel()->set_attempt(attempt);
  out.mutable_cancel()->set_reason("user asked");
  return out;
}

// The agent's log. hold_at(text) makes the thread that writes a line
// containing text wait there until release(), as a slow log write would;
// that holds the runner between its final report and its return.
class HoldingLog : public std::ostream, private std::streambuf {
 public:
  HoldingLog() : std::ostream(static_cast<std::streambuf*>(this)) {}
  void hold_at(std::string text) {
    std::lock_guard lock(mu_);
    hold_at_ = std::move(text);
  }
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    changed_.notify_all();
  }
  bool holding() {
    std::lock_guard lock(mu_);
    return holding_;
  }
  std::string str() {
    std::lock_guard lock(mu_);
    return text_;
  }

 private:
  int overflow(int ch) override {
    if (ch == std::char_traits<char>::eof()) return 0;
    std::unique_lock lock(mu_);
    text_ += char(ch);
    line_ += char(ch);
    if (ch != '\n') return ch;
    const bool hold = !hold_at_.empty() && line_.find(hold_at_) != std::string::npos;
    line_.clear();
    if (hold) {
      holding_ = true;
      changed_.wait_for(lock, seconds(30), [&] { return released_; });
      holding_ = false;
    }
    return ch;
  }

  std::mutex mu_;
  std::condition_variable changed_;
  std::string text_, line_, hold_at_;
  bool released_ = false, holding_ = false;
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.start());
    AgentOptions options;
    options.connection.address = server_.address();
    options.metrics_listen = "127.0.0.1:0";
    options.advertise_host = "worker-host";
    options.executable = MIXTRAIN_WORKER_BINARY;
    absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::create(options, log_);
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = std::move(*agent);
    thread_ = std::thread([this] { EXPECT_TRUE(agent_->run().ok()); });
    ASSERT_TRUE(eventually([&] { return !service_.registrations().empty(); }, milliseconds(10000)));
  }
  void TearDown() override {
    if (agent_) agent_->stop();
    if (thread_.joinable()) thread_.join();
  }

  // The final reports (not RUNNING) so far.
  std::vector<v1::ReportProgressRequest> finals() {
    std::vector<v1::ReportProgressRequest> out;
    for (const auto& p : service_.progress())
      if (p.outcome() != v1::TASK_OUTCOME_RUNNING) out.push_back(p);
    return out;
  }
  bool has_running_report() {
    for (const auto& p : service_.progress())
      if (p.outcome() == v1::TASK_OUTCOME_RUNNING) return true;
    return false;
  }
  std::string delivered_output() {
    std::string out;
    for (const auto& request : service_.logs())
      for (const std::string& line : request.lines()) out += line + "\n";
    return out;
  }

  test_support::TempDir dir_;
  testing::TestWorkerService service_;
  testing::TestServer server_{service_};
  HoldingLog log_;
  std::unique_ptr<Agent> agent_;
  std::thread thread_;
};

TEST_F(AgentTest, RegistersRunsATaskAndReportsItsOutcome) {
  const v1::RegisterRequest registration = service_.registrations().at(0);
  EXPECT_EQ(registration.metrics_address(),
            "worker-host:" + std::to_string(agent_->metrics_port()));
  EXPECT_GE(registration.resources().cpu_cores(), 1);
  EXPECT_EQ(registration.resources().memory_bytes(),
            default_memory_limit(detect_resources("cpu").memory_bytes()));
  EXPECT_GT(registration.resources().memory_bytes(), 0);
  EXPECT_EQ(registration.resources().backend(), v1::BACKEND_CPU);
  EXPECT_TRUE(registration.previous_worker_id().empty());
  EXPECT_EQ(registration.data_address(), "127.0.0.1");  // its route to the coordinator
  // No --threads: the coordinator sizes them from the workers on its host.
  EXPECT_EQ(registration.resources().threads(), 0);
  EXPECT_EQ(registration.resources().host_id(), host_id());
  EXPECT_FALSE(registration.resources().host_id().empty());
  EXPECT_GE(registration.resources().host_cores(), registration.resources().cpu_cores());

  service_.send(start(testing::tiny_task(testing::tiny_spec(10), dir_.path("ckpt"))));
  ASSERT_TRUE(eventually([&] { return !finals().empty(); }, milliseconds(60000)));
  const v1::ReportProgressRequest final = finals().at(0);
  EXPECT_EQ(final.outcome(), v1::TASK_OUTCOME_SUCCEEDED) << final.message();
  EXPECT_EQ(final.worker_id(), "w1");
  EXPECT_EQ(final.progress().step(), 10);
  EXPECT_GT(final.progress().val_loss(), 0.0);
  EXPECT_NE(final.summary_json().find("\"status\":\"succeeded\""), std::string::npos);
  EXPECT_NE(delivered_output().find("step 10/10"), std::string::npos) << delivered_output();
  EXPECT_TRUE(eventually([&] { return !service_.heartbeats().empty(); }, milliseconds(5000)));

  // The next task, as soon as the coordinator has the last one's outcome.
  v1::Task next = testing::tiny_task(testing::tiny_spec(3), dir_.path("ckpt2"));
  next.set_job_id("job-2");
  service_.send(start(next));
  ASSERT_TRUE(eventually([&] { return finals().size() == 2; }, milliseconds(60000)));
  EXPECT_EQ(finals().at(1).task().job_id(), "job-2");
  EXPECT_EQ(finals().at(1).outcome(), v1::TASK_OUTCOME_SUCCEEDED) << finals().at(1).message();

  agent_->stop();
  thread_.join();
  EXPECT_NE(log_.str().find("mixtrain-worker: registered as w1 with " + server_.address() +
                            ", data address 127.0.0.1, metrics on port " +
                            std::to_string(agent_->metrics_port())),
            std::string::npos)
      << log_.str();
}

TEST_F(AgentTest, AFinishedTaskIsListedUntilTheCoordinatorTookItsOutcome) {
  // The coordinator takes a task missing from the heartbeats for one that
  // vanished without an outcome; a final report still on its way must not
  // make a successful job fail.
  ASSERT_TRUE(eventually([&] { return !service_.heartbeats().empty(); }, milliseconds(5000)));
  service_.refuse_finals(true);
  service_.send(start(testing::tiny_task(testing::tiny_spec(3), dir_.path("ckpt"))));
  ASSERT_TRUE(eventually([&] { return service_.refused_finals() > 0; }, milliseconds(60000)));
  const size_t finished_at = service_.heartbeats().size();
  std::this_thread::sleep_for(milliseconds(1200));  // six heartbeat intervals
  const std::vector<v1::HeartbeatRequest> while_unreported = service_.heartbeats();
  service_.refuse_finals(false);  // before any ASSERT, so that TearDown's flush ends
  ASSERT_GT(while_unreported.size(), finished_at + 2);
  for (size_t i = finished_at; i < while_unreported.size(); ++i) {
    ASSERT_EQ(while_unreported[i].running_size(), 1) << i;
    EXPECT_EQ(while_unreported[i].running(0).job_id(), "job-1");
  }
  ASSERT_TRUE(eventually([&] { return !finals().empty(); }, milliseconds(10000)));
  EXPECT_EQ(finals().at(0).outcome(), v1::TASK_OUTCOME_SUCCEEDED) << finals().at(0).message();
  // Once taken, it is no longer listed.
  const size_t reported_at = service_.heartbeats().size();
  ASSERT_TRUE(eventually([&] { return service_.heartbeats().size() > reported_at + 1; },
                         milliseconds(5000)));
  EXPECT_EQ(service_.heartbeats().back().running_size(), 0);
}

TEST_F(AgentTest, ARepeatedStartOfTheRunningTaskIsIgnored) {
  const v1::Task task = testing::tiny_task(testing::tiny_spec(200), dir_.path("ckpt"));
  service_.send(start(task));
  ASSERT_TRUE(eventually([&] { return has_running_report(); }, milliseconds(60000)));
  service_.send(start(task));  // written again on a new stream
  service_.send(cancel("job-1", 1));
  ASSERT_TRUE(eventually([&] { return !finals().empty(); }, milliseconds(20000)));
  ASSERT_EQ(finals().size(), 1u);
  EXPECT_EQ(finals().at(0).outcome(), v1::TASK_OUTCOME_CANCELLED) << finals().at(0).message();
}

TEST_F(AgentTest, TaskSurvivesACoordinatorRestartAndCanBeCancelledAfter) {
  service_.send(start(testing::tiny_task(testing::tiny_spec(1000000), dir_.path("ckpt"))));
  ASSERT_TRUE(eventually([&] { return has_running_report(); }, milliseconds(60000)));

  const int port = server_.port();
  server_.stop();
  service_.forget_workers();
  std::this_thread::sleep_for(milliseconds(500));
  ASSERT_TRUE(server_.start(port));
  ASSERT_TRUE(
      eventually([&] { return service_.registrations().size() >= 2; }, milliseconds(15000)));
  const v1::RegisterRequest again = service_.registrations().at(1);
  EXPECT_EQ(again.previous_worker_id(), "w1");
  ASSERT_EQ(again.running_size(), 1);
  EXPECT_EQ(again.running(0).job_id(), "job-1");
  EXPECT_TRUE(finals().empty());  // the task kept running

  service_.send(cancel("job-1", 1));
  ASSERT_TRUE(eventually([&] { return !finals().empty(); }, milliseconds(15000)));
  EXPECT_EQ(finals().at(0).outcome(), v1::TASK_OUTCOME_CANCELLED);
  EXPECT_EQ(finals().at(0).worker_id(), "w2");
  EXPECT_EQ(finals().at(0).message(), "rank 0 cancelled: user asked");
}

// Issue 29: an agent whose id was taken under other credentials got
// "wrong credentials" on every heartbeat and never registered again.
TEST_F(AgentTest, RegistersAgainWhenItsCredentialsAreRefused) {
  ASSERT_TRUE(eventually([&] { return !service_.heartbeats().empty(); }, milliseconds(10000)));
  service_.refuse_credentials();
  ASSERT_TRUE(
      eventually([&] { return service_.registrations().size() >= 2; }, milliseconds(10000)));
  EXPECT_EQ(service_.registrations().at(1).previous_worker_id(), "w1");
}

// Issue 30: a scaled-down worker (SIGTERM) left a LOST entry behind.
TEST_F(AgentTest, DeregistersWhenItStops) {
  agent_->stop();
  thread_.join();
  EXPECT_EQ(service_.deregistered(), std::vector<std::string>{"w1"});
}

TEST_F(AgentTest, RefusesBadTasksAndASecondTaskWithoutStopping) {
  v1::Task bad = testing::tiny_task(testing::tiny_spec(3), dir_.path("ckpt"));
  bad.set_rank(5);
  bad.set_world_size(2);
  service_.send(start(bad));
  ASSERT_TRUE(eventually([&] { return !finals().empty(); }, milliseconds(10000)));
  EXPECT_EQ(finals().at(0).outcome(), v1::TASK_OUTCOME_FAILED);
  EXPECT_EQ(finals().at(0).message(), "invalid task: rank 5 outside world_size 2");

  service_.send(start(testing::tiny_task(testing::tiny_spec(1000000), dir_.path("ckpt"))));
  ASSERT_TRUE(eventually([&] { return has_running_report(); }, milliseconds(60000)));
  v1::Task second = testing::tiny_task(testing::tiny_spec(3), dir_.path("ckpt2"));
  second.set_job_id("job-2");
  service_.send(start(second));
  // The second task is refused at once, naming the one still running.
  ASSERT_TRUE(eventually([&] { return finals().size() == 2u; }, milliseconds(10000)));
  EXPECT_EQ(finals().at(1).outcome(), v1::TASK_OUTCOME_FAILED);
  EXPECT_EQ(finals().at(1).task().job_id(), "job-2");
  EXPECT_NE(finals().at(1).message().find("this worker still runs job job-1"), std::string::npos)
      << finals().at(1).message();
  service_.send(cancel("job-2", 1));  // not running: ignored
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(finals().size(), 2u);

  // Stopping the agent cancels its task and still delivers the outcome.
  agent_->stop();
  thread_.join();
  ASSERT_EQ(finals().size(), 3u);
  EXPECT_EQ(finals().at(2).outcome(), v1::TASK_OUTCOME_CANCELLED);
  EXPECT_EQ(finals().at(2).task().job_id(), "job-1");
}

TEST_F(AgentTest, TheNextTaskMayArriveWhileTheLastOneHandsOverItsOutcome) {
  // The coordinator answers a final report with the next task at once; the
  // runner that sent the report may not have returned yet. That task must
  // start, not be refused for the one that already ended.
  log_.hold_at("job job-1 attempt 1 rank 0 succeeded");
  service_.send(start(testing::tiny_task(testing::tiny_spec(3), dir_.path("ckpt"))));
  ASSERT_TRUE(eventually([&] { return !finals().empty() && log_.holding(); }, milliseconds(60000)));
  v1::Task next = testing::tiny_task(testing::tiny_spec(3), dir_.path("ckpt2"));
  next.set_job_id("job-2");
  service_.send(start(next));
  std::this_thread::sleep_for(milliseconds(500));  // a refusal would be on its way now
  log_.release();
  ASSERT_TRUE(eventually([&] { return finals().size() == 2; }, milliseconds(60000)));
  EXPECT_EQ(finals().at(1).task().job_id(), "job-2");
  EXPECT_EQ(finals().at(1).outcome(), v1::TASK_OUTCOME_SUCCEEDED) << finals().at(1).message();
}

}  // namespace
}  // namespace mixtrain::worker
