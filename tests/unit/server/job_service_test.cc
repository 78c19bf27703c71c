// Why: clients only ever see the coordinator through gRPC, so these tests
// start a real server on a loopback port and call it with a real stub:
// submissions land QUEUED and are listed, every malformed spec is refused
// with the problem named while the server keeps serving, calls without the
// right token change nothing, and a queued job can be cancelled.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "server/coordinator_server.h"
#include "proto/mixtrain.grpc.pb.h"
#include "test_support/temp_dir.h"

namespace mixtrain::server {
namespace {

constexpr char kToken[] = "s3cret-token";
// Lines 1 and 2 of most specs; anything after begins on line 3.
#define HEAD "name: t\ndata: {train: builtin:demo}\n"
constexpr char kValidSpec[] = HEAD "train: {steps: 10, warmup_steps: 2}\n";

class CoordinatorTest : public testing::Test {
 protected:
  void SetUp() override { start(); }

  // Starts (again) a coordinator on the test's database and connects to it.
  void start() {
    server_.reset();
    CoordinatorOptions options;
    options.listen = "127.0.0.1:0";
    options.http_listen = "127.0.0.1:0";
    options.db_path = dir_.path("jobs.db");
    options.auth_token = kToken;
    absl::StatusOr<std::unique_ptr<CoordinatorServer>> server = CoordinatorServer::start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    stub_ = v1::JobService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
  }

  // A context with a deadline and, unless empty, `authorization`.
  static std::unique_ptr<grpc::ClientContext> context(
      const std::string& authorization = std::string("Bearer ") + kToken) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!authorization.empty()) context->AddMetadata("authorization", authorization);
    return context;
  }

  grpc::Status submit(const std::string& yaml, std::string* id = nullptr,
                      const std::string& authorization = std::string("Bearer ") + kToken) {
    v1::SubmitJobRequest request;
    request.set_spec_yaml(yaml);
    request.set_source_name("t.yaml");
    v1::SubmitJobResponse response;
    grpc::Status status = stub_->SubmitJob(context(authorization).get(), request, &response);
    if (id != nullptr) *id = response.id();
    return status;
  }

  v1::ListJobsResponse list_jobs() {
    v1::ListJobsResponse response;
    const grpc::Status status = stub_->ListJobs(context().get(), {}, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  test_support::TempDir dir_;
  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<v1::JobService::Stub> stub_;
};

TEST_F(CoordinatorTest, SubmittedJobIsQueuedAndShown) {
  std::string id;
  const grpc::Status status = submit(kValidSpec, &id);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_FALSE(id.empty());

  v1::GetJobRequest get;
  get.set_id(id);
  v1::Job job;
  ASSERT_TRUE(stub_->GetJob(context().get(), get, &job).ok());
  EXPECT_EQ(job.id(), id);
  EXPECT_EQ(job.name(), "t");
  EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(job.progress().steps(), 10);
  EXPECT_EQ(job.spec_yaml(), kValidSpec);

  const v1::ListJobsResponse jobs = list_jobs();
  ASSERT_EQ(jobs.jobs_size(), 1);
  EXPECT_EQ(jobs.jobs(0).id(), id);
  EXPECT_EQ(jobs.jobs(0).state(), v1::JOB_STATE_QUEUED);
}

// At 200,000 jobs one ListJobs answer outgrew what a client accepts, for
// good (issue 29): jobs come a page at a time, newest first, and the next
// page token goes on where a page ended.
TEST_F(CoordinatorTest, ListJobsComesAPageAtATimeNewestFirst) {
  std::vector<std::string> submitted;
  for (int i = 0; i < 5; ++i) {
    std::string id;
    ASSERT_TRUE(submit(kValidSpec, &id).ok());
    submitted.insert(submitted.begin(), id);  // newest first
  }
  std::vector<std::string> listed;
  v1::ListJobsRequest request;
  request.set_page_size(2);
  int pages = 0;
  do {
    v1::ListJobsResponse page;
    const grpc::Status status = stub_->ListJobs(context().get(), request, &page);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_LE(page.jobs_size(), 2);
    for (const v1::Job& job : page.jobs()) {
      listed.push_back(job.id());
      EXPECT_TRUE(job.spec_yaml().empty());
    }
    request.set_page_token(page.next_page_token());
    ++pages;
  } while (!request.page_token().empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(listed, submitted);

  for (const char* token : {"x1", "-5", "0", "99999999999999999999"}) {
    request.set_page_token(token);
    v1::ListJobsResponse page;
    const grpc::Status status = stub_->ListJobs(context().get(), request, &page);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << token;
    EXPECT_NE(status.error_message().find("page_token"), std::string::npos);
  }
  EXPECT_EQ(list_jobs().jobs_size(), 5);  // the default page holds them all
}

TEST_F(CoordinatorTest, RestartedCoordinatorStillHasTheJob) {
  std::string id;
  ASSERT_TRUE(submit(kValidSpec, &id).ok());
  start();
  v1::GetJobRequest get;
  get.set_id(id);
  v1::Job job;
  ASSERT_TRUE(stub_->GetJob(context().get(), get, &job).ok());
  EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
}

// grpc.health.v1 without its generated stub: the empty request (every
// service) and each service's full name (what probes and load balancers
// ask) must be answered SERVING, serialized as field 1 = 1.
class HealthTest : public CoordinatorTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(HealthTest, SaysServingWithoutAToken) {
  grpc::GenericStub stub(grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                             grpc::InsecureChannelCredentials()));
  grpc::CompletionQueue queue;
  const std::unique_ptr<grpc::ClientContext> call_context = context("");
  // HealthCheckRequest{service = GetParam()}: field 1, length-delimited.
  std::string encoded;
  if (!GetParam().empty()) encoded = std::string("\x0a", 1) + char(GetParam().size()) + GetParam();
  grpc::Slice request_bytes(encoded);
  const grpc::ByteBuffer request(&request_bytes, 1);
  auto call =
      stub.PrepareUnaryCall(call_context.get(), "/grpc.health.v1.Health/Check", request, &queue);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, nullptr);
  void* tag = nullptr;
  bool ok = false;
  ASSERT_TRUE(queue.Next(&tag, &ok));
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) bytes.append(slice.begin(), slice.end());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
}

INSTANTIATE_TEST_SUITE_P(Services, HealthTest,
                         ::testing::Values("", "mixtrain.v1.JobService",
                                           "mixtrain.v1.WorkerService"),
                         [](const auto& info) {
                           return info.param.empty() ? std::string("Server")
                                                     : info.param.substr(info.param.rfind('.') + 1);
                         });

TEST_F(CoordinatorTest, TheBearerSchemeIsCaseInsensitive) {
  for (const std::string scheme : {"Bearer", "bearer", "BEARER"}) {
    grpc::ClientContext call;
    call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    call.AddMetadata("authorization", scheme + " " + kToken);
    v1::ListJobsResponse jobs;
    EXPECT_TRUE(stub_->ListJobs(&call, {}, &jobs).ok()) << scheme;
  }
  grpc::ClientContext wrong;
  wrong.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  wrong.AddMetadata("authorization", std::string("Basic ") + kToken);
  v1::ListJobsResponse jobs;
  EXPECT_EQ(stub_->ListJobs(&wrong, {}, &jobs).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(CoordinatorTest, UnknownJobIsNotFound) {
  v1::GetJobRequest get;
  get.set_id("no-such-job");
  v1::Job job;
  EXPECT_EQ(stub_->GetJob(context().get(), get, &job).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(CoordinatorTest, QueuedJobCanBeCancelledOnce) {
  std::string id;
  ASSERT_TRUE(submit(kValidSpec, &id).ok());
  v1::CancelJobRequest cancel;
  cancel.set_id(id);
  v1::Job job;
  ASSERT_TRUE(stub_->CancelJob(context().get(), cancel, &job).ok());
  EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(list_jobs().jobs(0).state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(stub_->CancelJob(context().get(), cancel, &job).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(CoordinatorTest, ListFiltersByState) {
  std::string cancelled_id;
  ASSERT_TRUE(submit(kValidSpec, &cancelled_id).ok());
  ASSERT_TRUE(submit(kValidSpec).ok());
  ASSERT_TRUE(server_->database().transition(cancelled_id, v1::JOB_STATE_CANCELLED, "").ok());
  v1::ListJobsRequest request;
  request.add_states(v1::JOB_STATE_QUEUED);
  v1::ListJobsResponse response;
  ASSERT_TRUE(stub_->ListJobs(context().get(), request, &response).ok());
  ASSERT_EQ(response.jobs_size(), 1);
  EXPECT_NE(response.jobs(0).id(), cancelled_id);
}

TEST_F(CoordinatorTest, CallsWithoutTheTokenAreRefusedAndChangeNothing) {
  for (const std::string& authorization :
       std::vector<std::string>{"", "Bearer wrong", "Bearer s3cret-toke", "Bearer s3cret-token2",
                                "Basic s3cret-token", kToken}) {
    std::string id;
    EXPECT_EQ(submit(kValidSpec, &id, authorization).error_code(),
              grpc::StatusCode::UNAUTHENTICATED)
        << "'" << authorization << "'";
    v1::ListJobsResponse jobs;
    EXPECT_EQ(stub_->ListJobs(context(authorization).get(), {}, &jobs).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(list_jobs().jobs_size(), 0);
  EXPECT_TRUE(server_->database().list_jobs()->empty());

  std::string id;
  ASSERT_TRUE(submit(kValidSpec, &id).ok());
  v1::CancelJobRequest cancel;
  cancel.set_id(id);
  v1::Job job;
  EXPECT_EQ(stub_->CancelJob(context("Bearer wrong").get(), cancel, &job).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(server_->database().get_job(id)->state, v1::JOB_STATE_QUEUED);
}

struct BadSubmission {
  const char* label;
  std::string yaml;
  const char* expected;  // a substring of the status message
};

void PrintTo(const BadSubmission& submission, std::ostream* out) { *out << submission.label; }

class BadSubmissionTest : public CoordinatorTest,
                          public testing::WithParamInterface<BadSubmission> {};

TEST_P(BadSubmissionTest, IsInvalidArgumentNamingTheProblemAndServerKeepsServing) {
  const grpc::Status status = submit(GetParam().yaml);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find(GetParam().expected), std::string::npos)
      << status.error_message();
  EXPECT_EQ(list_jobs().jobs_size(), 0);
  EXPECT_TRUE(submit(kValidSpec).ok());
}

INSTANTIATE_TEST_SUITE_P(
    Specs, BadSubmissionTest,
    testing::Values(
        BadSubmission{"syntax_error", "name: t\nmodel: {layers: 2\ndata: x\n",
                      "t.yaml:3: YAML syntax error"},
        BadSubmission{"empty", "", "t.yaml: the document is empty"},
        BadSubmission{"two_documents", "name: a\n---\nname: b\n", "expected one YAML document"},
        BadSubmission{"nested_30000_deep",
                      HEAD "model: " + std::string(30000, '[') + std::string(30000, ']') + "\n",
                      "t.yaml:3: nested too deeply (more than"},
        BadSubmission{"unknown_key", HEAD "modle: {}\n",
                      "t.yaml:3: unknown key 'modle' (did you mean 'model'?)"},
        BadSubmission{"unknown_nested_key", HEAD "train:\n  microbatch: 4\n",
                      "t.yaml:4: train: unknown key 'microbatch'"},
        BadSubmission{"string_for_int", HEAD "train:\n  steps: many\n",
                      "t.yaml:4: train.steps: expected a non-negative integer, got 'many'"},
        BadSubmission{"list_for_map", HEAD "model: [4, 4]\n", "t.yaml:3: model: expected a map"},
        BadSubmission{"negative_stage", HEAD "zero: {stage: -1}\n", "t.yaml:3: zero.stage"},
        BadSubmission{"heads_not_dividing_dim", HEAD "model: {heads: 5, dim: 384}\n",
                      "t.yaml:3: model.heads"},
        BadSubmission{"zero_steps", HEAD "train: {steps: 0}\n", "t.yaml:3: train.steps"},
        BadSubmission{"zero_workers", HEAD "resources: {workers: 0}\n",
                      "t.yaml:3: resources.workers"},
        BadSubmission{"unknown_dtype", HEAD "precision: {compute: fp64}\n",
                      "t.yaml:3: precision.compute"},
        BadSubmission{"missing_name", "data: {train: builtin:demo}\n", "name"},
        BadSubmission{"wrong_version", HEAD "version: 2\n", "version"},
        BadSubmission{"oversized", HEAD + std::string(kMaxSpecBytes, '#'),
                      "at most 65536 are accepted"}),
    [](const testing::TestParamInfo<BadSubmission>& info) { return info.param.label; });

}  // namespace
}  // namespace mixtrain::server
