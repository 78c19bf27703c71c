// Why: a request is the coordinator's untrusted input (issue 13): a
// summary nested 100,000 deep crashed it under the scheduler lock, and a
// 3.9 MB source_name echoed into 50 error messages took it to 1.2 GB; a
// 1 MB summary of 95,000 keys cost 44 s of parsing (issue 29). Each such
// request must get INVALID_ARGUMENT naming the field, without its
// contents, while the coordinator keeps serving and the job it concerned
// still ends right; and nothing a worker sends is parsed before it proved
// who it is.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "cluster_fixture.h"
#include "server/error_text.h"

namespace mixtrain::server {
namespace {

using testing_support::call_context;
using testing_support::ClusterTest;
using testing_support::kClientToken;
using testing_support::kJoinToken;
using testing_support::rank_summary_json;
using testing_support::spec;

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST_F(ClusterTest, ADeeplyNestedSummaryIsRefusedAndTheJobStillSucceeds) {
  auto rank = worker();
  const std::string id = submit(spec(1));
  const v1::Task task = rank->next_start();
  for (const int depth : {100'000, 20'000, 33}) {
    const grpc::Status status = rank->report(task, v1::TASK_OUTCOME_SUCCEEDED, "", nested(depth));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << depth;
    EXPECT_EQ(status.error_message(),
              "summary_json is not valid JSON: JSON parse error: nesting deeper than 32");
    EXPECT_EQ(job(id).state(), v1::JOB_STATE_RUNNING);
  }
  const grpc::Status not_json = rank->report(task, v1::TASK_OUTCOME_SUCCEEDED, "", "{\"a\":");
  EXPECT_EQ(not_json.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(
      not_json.error_message().find("summary_json is not valid JSON: JSON parse error at byte"), 0u)
      << not_json.error_message();
  ASSERT_TRUE(rank->report(task, v1::TASK_OUTCOME_SUCCEEDED, "", rank_summary_json(0)).ok());
  EXPECT_EQ(await_state(id, v1::JOB_STATE_SUCCEEDED).summary_json(), rank_summary_json(0));
}

// A flat object of 95,000 keys in just under the 1 MB summary_json allows.
std::string wide_summary() {
  std::string text = "{";
  char member[32];
  for (int i = 0; i < 95'000; ++i) {
    std::snprintf(member, sizeof member, "%s\"k%05d\":0", i == 0 ? "" : ",", i);
    text += member;
  }
  return text + "}";
}

TEST_F(ClusterTest, AWideSummaryIsAnsweredWithinASecond) {
  auto rank = worker();
  const std::string id = submit(spec(1));
  const v1::Task task = rank->next_start();
  const std::string wide = wide_summary();
  ASSERT_GT(wide.size(), 900'000u);
  ASSERT_LE(wide.size(), 1u << 20);
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status status = rank->report(task, v1::TASK_OUTCOME_SUCCEEDED, "", wide);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  std::printf("a 95,000-key summary of %zu bytes answered in %.3f s\n", wide.size(), took.count());
  // The bound: refused or accepted in under a second (it took 44 s).
  EXPECT_LT(took.count(), 1.0);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "summary_json is not valid JSON: JSON parse error: an object with more than 1024 keys");
  EXPECT_EQ(job(id).state(), v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(rank->report(task, v1::TASK_OUTCOME_SUCCEEDED, "", rank_summary_json(0)).ok());
  EXPECT_EQ(await_state(id, v1::JOB_STATE_SUCCEEDED).summary_json(), rank_summary_json(0));
}

TEST_F(ClusterTest, ASummaryIsNotReadBeforeTheWorkerProvedWhoItIs) {
  auto rank = worker();
  submit(spec(1));
  const v1::Task task = rank->next_start();
  auto stub = v1::WorkerService::NewStub(channel_);
  v1::ReportProgressRequest request;
  request.set_worker_id(rank->id());
  *request.mutable_task() = v1::running_of(task);
  request.set_outcome(v1::TASK_OUTCOME_SUCCEEDED);
  request.set_summary_json(nested(100'000));
  v1::ReportProgressResponse response;
  const grpc::Status wrong_secret =
      stub->ReportProgress(call_context(kJoinToken, "not-its-secret").get(), request, &response);
  EXPECT_EQ(wrong_secret.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(wrong_secret.error_message(), "wrong credentials for worker '" + rank->id() + "'");
  request.set_worker_id("no-such-worker");
  const grpc::Status unknown =
      stub->ReportProgress(call_context(kJoinToken, rank->secret()).get(), request, &response);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND) << unknown.error_message();
}

TEST_F(ClusterTest, AHugeSourceNameIsRefusedWithoutBeingEchoed) {
  std::string yaml = spec(1);
  for (int i = 0; i < 50; ++i) yaml += "unknown_" + std::to_string(i) + ": 1\n";
  v1::SubmitJobRequest request;
  request.set_spec_yaml(yaml);
  request.set_source_name(std::string(3'900'000, 'n'));
  v1::SubmitJobResponse response;
  const grpc::Status status =
      jobs_->SubmitJob(call_context(kClientToken).get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "SubmitJobRequest.source_name has 3900000 bytes; at most 256 are accepted");

  // Within bounds, the 50 mistakes are listed up to a limit.
  request.set_source_name(std::string(200, 'n'));
  const grpc::Status listed =
      jobs_->SubmitJob(call_context(kClientToken).get(), request, &response);
  EXPECT_EQ(listed.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(listed.error_message().find(" more"), std::string::npos);
  EXPECT_LT(listed.error_message().size(), kMaxErrorBytes + 64);
  EXPECT_EQ(list_workers().workers_size(), 0);  // still serving
}

TEST_F(ClusterTest, AValidationMessageOfLongProblemsArrivesBoundedInsteadOfBreakingTheCall) {
  std::string yaml = spec(1);
  for (int i = 0; i < 25; ++i) yaml += std::string(1000, 'k') + std::to_string(i) + ": 1\n";
  v1::SubmitJobRequest request;
  request.set_spec_yaml(yaml);
  v1::SubmitJobResponse response;
  const grpc::Status status =
      jobs_->SubmitJob(call_context(kClientToken).get(), request, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_EQ(status.error_message().find("job.yaml:"), 0u) << status.error_message();
  EXPECT_NE(status.error_message().find(std::string(1000, 'k') + "0"), std::string::npos);
  EXPECT_NE(status.error_message().find("\n... and "), std::string::npos);
  EXPECT_LT(status.error_message().size(), kMaxErrorBytes + 64);
}

TEST_F(ClusterTest, EveryFieldOfEveryRequestIsBounded) {
  auto rank = worker();
  const std::string id = submit(spec(1));
  const v1::Task task = rank->next_start();
  const grpc::Status long_line = rank->log(task, {std::string(100'000, 'x')});
  EXPECT_EQ(long_line.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(long_line.error_message(),
            "ReportLogRequest.lines has 100000 bytes; at most 65536 are accepted");
  const grpc::Status many_lines = rank->log(task, std::vector<std::string>(5000, "x"));
  EXPECT_EQ(many_lines.error_message(),
            "ReportLogRequest.lines has 5000 entries; at most 4096 are accepted");

  auto stub = v1::WorkerService::NewStub(channel_);
  v1::HeartbeatRequest heartbeat;  // a nested message's string
  heartbeat.set_worker_id(rank->id());
  heartbeat.add_running()->set_job_id(std::string(2000, 'j'));
  v1::HeartbeatResponse answer;
  const grpc::Status nested_field = stub->Heartbeat(rank->context().get(), heartbeat, &answer);
  EXPECT_EQ(nested_field.error_message(),
            "RunningTask.job_id has 2000 bytes; at most 1024 are accepted");

  v1::WatchJobRequest watch;  // a stream's request
  watch.set_id(std::string(5000, 'i'));
  grpc::ClientContext context;
  context.AddMetadata("authorization", std::string("Bearer ") + kClientToken);
  auto reader = jobs_->WatchJob(&context, watch);
  v1::JobUpdate update;
  EXPECT_FALSE(reader->Read(&update));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  ASSERT_TRUE(rank->log(task, {"within bounds"}).ok());
  ASSERT_TRUE(rank->report(task, v1::TASK_OUTCOME_SUCCEEDED).ok());
  await_state(id, v1::JOB_STATE_SUCCEEDED);
}

}  // namespace
}  // namespace mixtrain::server
