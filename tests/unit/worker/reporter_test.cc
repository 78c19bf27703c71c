// Why: a task's outcome must reach the coordinator even across its
// restarts, without flooding it. These tests run the reporter against a
// real gRPC server: progress is throttled but the latest arrives, logs
// arrive whole and in order in few calls, the final outcome survives an
// outage, and an unknown-worker answer triggers re-registration.
#include "worker/reporter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "test_worker_service.h"

namespace mixtrain::worker {
namespace {

using std::chrono::milliseconds;

v1::RunningTask task() {
  v1::RunningTask out;
  out.set_job_id("job-1");
  out.set_attempt(2);
  out.set_rank(1);
  return out;
}

v1::Progress at_step(int64_t step) {
  v1::Progress out;
  out.set_step(step);
  out.set_steps(100);
  return out;
}

class ReporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.start());
    ConnectionOptions options;
    options.address = server_.address();
    connection_ = std::move(*WorkerConnection::open(options));
  }

  std::vector<std::string> delivered_lines() {
    std::vector<std::string> out;
    for (const v1::ReportLogRequest& request : service_.logs())
      for (const std::string& line : request.lines()) out.push_back(line);
    return out;
  }

  testing::TestWorkerService service_;
  testing::TestServer server_{service_};
  std::unique_ptr<WorkerConnection> connection_;
};

TEST_F(ReporterTest, ThrottlesProgressBatchesLogsAndEndsWithTheOutcome) {
  Reporter reporter(*connection_, [](const std::string&) {});
  reporter.set_worker_id("w1");
  std::vector<std::string> lines;
  for (int i = 0; i < 250; ++i) lines.push_back("line " + std::to_string(i));
  for (int step = 1; step <= 50; ++step) {
    reporter.progress(task(), at_step(step));
    for (int i = 0; i < 5; ++i) reporter.log(task(), lines[(step - 1) * 5 + i]);
    std::this_thread::sleep_for(milliseconds(10));
  }
  reporter.finish(task(), v1::TASK_OUTCOME_FAILED, "rank 1 exited with code 1: boom", "{}");
  ASSERT_TRUE(service_.wait_for_final(milliseconds(10000)));
  ASSERT_TRUE(reporter.flush(milliseconds(5000)));

  const std::vector<v1::ReportProgressRequest> progress = service_.progress();
  ASSERT_GE(progress.size(), 2u);
  // 50 updates over ~0.5 s: at most two RUNNING reports a second get through.
  EXPECT_LE(progress.size(), 4u);
  const v1::ReportProgressRequest& final = progress.back();
  EXPECT_EQ(final.outcome(), v1::TASK_OUTCOME_FAILED);
  EXPECT_EQ(final.message(), "rank 1 exited with code 1: boom");
  EXPECT_EQ(final.summary_json(), "{}");
  EXPECT_EQ(final.progress().step(), 50);  // the latest progress rides along
  EXPECT_EQ(final.worker_id(), "w1");
  EXPECT_EQ(final.task().job_id(), "job-1");
  EXPECT_EQ(final.task().attempt(), 2);
  EXPECT_EQ(final.task().rank(), 1);
  for (size_t i = 0; i + 1 < progress.size(); ++i)
    EXPECT_EQ(progress[i].outcome(), v1::TASK_OUTCOME_RUNNING);

  EXPECT_EQ(delivered_lines(), lines);
  EXPECT_LE(service_.logs().size(), 8u);
}

TEST_F(ReporterTest, FinalOutcomeSurvivesACoordinatorOutage) {
  const int port = server_.port();
  server_.stop();
  Reporter reporter(*connection_, [](const std::string&) {});
  reporter.set_worker_id("w1");
  reporter.log(task(), "before the outage ended");
  reporter.finish(task(), v1::TASK_OUTCOME_SUCCEEDED, "", "{\"status\":\"succeeded\"}");
  EXPECT_FALSE(reporter.flush(milliseconds(600)));
  ASSERT_TRUE(server_.start(port));
  ASSERT_TRUE(service_.wait_for_final(milliseconds(15000)));
  EXPECT_EQ(service_.progress().back().outcome(), v1::TASK_OUTCOME_SUCCEEDED);
  EXPECT_EQ(delivered_lines(), std::vector<std::string>{"before the outage ended"});
}

TEST_F(ReporterTest, UnknownWorkerAsksForRegistrationThenDelivers) {
  service_.set_known_worker("w2");  // a restarted coordinator gave a new id
  std::atomic<int> asked{0};
  Reporter* self = nullptr;
  Reporter reporter(*connection_, [&](const std::string& unknown_id) {
    EXPECT_EQ(unknown_id, "w1");
    ++asked;
    self->set_worker_id("w2");  // what the agent does once registered again
  });
  self = &reporter;
  reporter.set_worker_id("w1");
  reporter.finish(task(), v1::TASK_OUTCOME_CANCELLED, "rank 1 cancelled: user", "");
  ASSERT_TRUE(service_.wait_for_final(milliseconds(10000)));
  EXPECT_GE(asked.load(), 1);
  EXPECT_EQ(service_.progress().back().worker_id(), "w2");
  EXPECT_EQ(service_.progress().back().outcome(), v1::TASK_OUTCOME_CANCELLED);
}

}  // namespace
}  // namespace mixtrain::worker
