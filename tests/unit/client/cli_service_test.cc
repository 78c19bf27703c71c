// Why: what the service commands print is a contract (DESIGN.md §3, §5):
// exit codes for each kind of failed call, the JSON keys scripts read, the
// state names, and tables that line up. These pin it without a coordinator.
#include <gtest/gtest.h>

#include <sstream>
#include <thread>
#include <vector>

#include "client/coordinator_client.h"
#include "client/job_view.h"
#include "client/logs_command.h"
#include "client/text_table.h"

namespace mixtrain::cli {
namespace {

CoordinatorClient client_at(const std::string& address) {
  ServiceOptions options;
  options.coordinator = address;
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::connect(options);
  EXPECT_TRUE(client.ok());
  return *client;
}

TEST(CoordinatorClientTest, ReportMapsEachFailureToItsExitCode) {
  CoordinatorClient client = client_at("127.0.0.1:9");
  struct Case {
    grpc::StatusCode code;
    int exit_code;
    std::string says;
  };
  const Case cases[] = {
      {grpc::StatusCode::UNAVAILABLE, 3, "mixtrain: cannot reach the coordinator at 127.0.0.1:9"},
      {grpc::StatusCode::DEADLINE_EXCEEDED, 3, "cannot reach the coordinator"},
      {grpc::StatusCode::UNAUTHENTICATED, 3, "not authorized (check --token / MIXTRAIN_TOKEN)"},
      {grpc::StatusCode::PERMISSION_DENIED, 3, "not authorized"},
      {grpc::StatusCode::NOT_FOUND, 2, "mixtrain: no job j-7\n"},
      {grpc::StatusCode::INVALID_ARGUMENT, 2, "job.yaml:3: model.heads: bad\njob.yaml:4: x: y\n"},
      {grpc::StatusCode::FAILED_PRECONDITION, 2, "mixtrain: job.yaml:3: model.heads: bad"},
      {grpc::StatusCode::UNIMPLEMENTED, 1, "does not serve this call"},
      {grpc::StatusCode::INTERNAL, 1, "failed the call"},
  };
  for (const Case& c : cases) {
    std::ostringstream err;
    const int code = client.report(
        grpc::Status(c.code, "job.yaml:3: model.heads: bad\njob.yaml:4: x: y"), "j-7", err);
    EXPECT_EQ(code, c.exit_code) << static_cast<int>(c.code);
    EXPECT_NE(err.str().find(c.says), std::string::npos) << err.str();
  }
}

TEST(CoordinatorClientTest, UnreadableCaFileIsRefused) {
  ServiceOptions options;
  options.tls_ca = "/no/such/ca.pem";
  const absl::StatusOr<CoordinatorClient> client = CoordinatorClient::connect(options);
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("/no/such/ca.pem"), std::string::npos);
}

TEST(CoordinatorClientTest, TransientCodesAreTheConnectionOnes) {
  EXPECT_TRUE(is_transient(grpc::StatusCode::UNAVAILABLE));
  EXPECT_TRUE(is_transient(grpc::StatusCode::CANCELLED));
  EXPECT_FALSE(is_transient(grpc::StatusCode::UNAUTHENTICATED));
  EXPECT_FALSE(is_transient(grpc::StatusCode::NOT_FOUND));
}

TEST(JobViewTest, StateNamesAreDesignNames) {
  EXPECT_EQ(state_name(v1::JOB_STATE_QUEUED), "QUEUED");
  EXPECT_EQ(state_name(v1::JOB_STATE_RUNNING), "RUNNING");
  EXPECT_EQ(state_name(v1::JOB_STATE_SUCCEEDED), "SUCCEEDED");
  EXPECT_EQ(state_name(v1::JOB_STATE_FAILED), "FAILED");
  EXPECT_EQ(state_name(v1::JOB_STATE_CANCELLED), "CANCELLED");
  EXPECT_FALSE(is_final(v1::JOB_STATE_RUNNING));
  EXPECT_TRUE(is_final(v1::JOB_STATE_CANCELLED));
}

v1::Job sample_job() {
  v1::Job job;
  job.set_id("j-1");
  job.set_name("demo");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  job.set_attempt(2);
  job.set_restarts(1);
  job.mutable_progress()->set_step(600);
  job.mutable_progress()->set_steps(600);
  job.add_workers("w-1");
  job.add_workers("w-2");
  v1::JobEvent* event = job.add_events();
  event->set_state(v1::JOB_STATE_QUEUED);
  event->set_message("submitted");
  job.set_summary_json(R"({"name": "demo", "status": "succeeded", "steps": 600,
      "final_train_loss": 0.39, "ranks": [{"rank": 0, "memory_bytes":
      {"device": {"peak": 2097152}, "host": {"peak": 0}}}]})");
  return job;
}

TEST(JobViewTest, JobJsonHasTheDesignKeys) {
  const nlohmann::ordered_json listed = job_json(sample_job(), /*details=*/false);
  for (const char* key : {"id", "name", "state", "attempt", "step", "steps", "workers"}) {
    EXPECT_TRUE(listed.contains(key)) << key;
  }
  EXPECT_FALSE(listed.contains("summary"));
  EXPECT_EQ(listed["state"], "SUCCEEDED");
  EXPECT_EQ(listed["workers"], nlohmann::ordered_json({"w-1", "w-2"}));

  const nlohmann::ordered_json status = job_json(sample_job(), /*details=*/true);
  EXPECT_EQ(status["summary"]["status"], "succeeded");
  EXPECT_EQ(status["events"][0]["state"], "QUEUED");
  EXPECT_EQ(status["restarts"], 1);
}

TEST(JobViewTest, SummaryIsNullBeforeTheEndOrWhenUnreadable) {
  EXPECT_TRUE(parse_summary("").is_null());
  EXPECT_TRUE(parse_summary("{not json").is_null());
  EXPECT_TRUE(parse_summary(R"({"steps":1,"steps":2})").is_null());  // read as parse_json reads
  v1::Job queued = sample_job();
  queued.clear_summary_json();
  EXPECT_TRUE(job_json(queued, true)["summary"].is_null());
}

TEST(JobViewTest, SummaryTableShowsLossesAndPeaks) {
  std::ostringstream out;
  print_summary_table(parse_summary(sample_job().summary_json()), out);
  EXPECT_NE(out.str().find("final train loss   0.3900"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("final val loss     -"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("rank 0 peak memory  device 2.0 MiB, host 0 B"), std::string::npos)
      << out.str();
  std::ostringstream nothing;
  print_summary_table(nullptr, nothing);
  EXPECT_EQ(nothing.str(), "");
}

// The ranks' last gradient ranges, summed, as bars between their lowest and
// highest nonzero power of two, with the dtype's range marked.
TEST(JobViewTest, SummaryTableChartsTheGradientRange) {
  nlohmann::ordered_json summary = parse_summary(sample_job().summary_json());
  auto range = [](int64_t at_minus_14, int64_t at_minus_20) {
    std::vector<int64_t> buckets(61, 0);
    buckets[static_cast<size_t>(-14 + 40)] = at_minus_14;
    buckets[static_cast<size_t>(-20 + 40)] = at_minus_20;
    return nlohmann::ordered_json{{"step", 600},        {"dtype", "fp16"}, {"min_log2", -40},
                                  {"buckets", buckets}, {"zeros", 10},     {"subnormals", 30},
                                  {"nonfinite", 0},     {"amax", 6.1e-5}};
  };
  summary["ranks"] =
      nlohmann::ordered_json::array({{{"rank", 0}, {"gradient_range", range(60, 10)}},
                                     {{"rank", 1}, {"gradient_range", range(0, 20)}}});
  std::ostringstream out;
  print_summary_table(summary, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("gradient range at step 600 (fp16 gradients, 110 elements over all ranks)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  zero         18.18%\n  subnormal    54.55%\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  <= 2^-14   54.55% " + std::string(40, '#') + "  <- fp16 smallest normal"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  <= 2^-20   27.27% " + std::string(20, '#') + "\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("  <= 2^-19    0.00%\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("2^-21"), std::string::npos) << "rows stop at the lowest nonzero bucket";
  summary["ranks"][1]["gradient_range"]["buckets"] = "garbage";
  std::ostringstream malformed;
  print_summary_table(summary, malformed);
  EXPECT_EQ(malformed.str().find("gradient range"), std::string::npos);
}

// Compute fp8: the quantized GEMM inputs get their own chart against
// E4M3's range, below the gradients'.
TEST(JobViewTest, SummaryTableChartsTheFp8ActivationsAgainstE4m3) {
  nlohmann::ordered_json summary = parse_summary(sample_job().summary_json());
  std::vector<int64_t> gradients(61, 0), activations(61, 0);
  gradients[static_cast<size_t>(-10 + 40)] = 5;
  activations[static_cast<size_t>(9 + 40)] = 3;   // (256, 512]: E4M3's max 448
  activations[static_cast<size_t>(-6 + 40)] = 1;  // (2^-7, 2^-6]: its smallest normal
  const nlohmann::ordered_json histogram_keys = {
      {"min_log2", -40}, {"zeros", 0}, {"subnormals", 0}, {"nonfinite", 0}, {"amax", 448}};
  nlohmann::ordered_json range = {{"step", 50}, {"dtype", "bf16"}, {"buckets", gradients}};
  range.update(histogram_keys);
  nlohmann::ordered_json fp8 = {{"dtype", "fp8_e4m3"}, {"buckets", activations}};
  fp8.update(histogram_keys);
  range["fp8_activations"] = fp8;
  summary["ranks"] = nlohmann::ordered_json::array({{{"rank", 0}, {"gradient_range", range}}});
  std::ostringstream out;
  print_summary_table(summary, out);
  const std::string text = out.str();
  const size_t gradients_at = text.find("gradient range at step 50 (bf16 gradients");
  const size_t fp8_at = text.find(
      "fp8 activation range at step 50 (fp8_e4m3 quantized GEMM inputs, 4 elements over all "
      "ranks)");
  ASSERT_NE(gradients_at, std::string::npos) << text;
  ASSERT_NE(fp8_at, std::string::npos) << text;
  EXPECT_LT(gradients_at, fp8_at);
  EXPECT_NE(text.find("  <= 2^9     75.00% " + std::string(40, '#') + "  <- fp8_e4m3 max"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("  <= 2^-6    25.00% " + std::string(13, '#') + "  <- fp8_e4m3 smallest normal"),
      std::string::npos)
      << text;
}

TEST(JobViewTest, AgeOfNothingIsADash) { EXPECT_EQ(format_age(0), "-"); }

TEST(TextTableTest, ColumnsLineUpWithoutTrailingSpaces) {
  TextTable table({"ID", "STATE", "MESSAGE"});
  table.add_row({"j-1", "QUEUED", ""});
  table.add_row({"j-100", "RUNNING", "ok"});
  std::ostringstream out;
  table.print(out);
  EXPECT_EQ(out.str(),
            "ID     STATE    MESSAGE\n"
            "j-1    QUEUED\n"
            "j-100  RUNNING  ok\n");
}

TEST(TextTableTest, TrimCellCutsLongAndMultiLineText) {
  EXPECT_EQ(trim_cell("short", 10), "short");
  EXPECT_EQ(trim_cell("a rather long message", 10), "a rathe...");
  EXPECT_EQ(trim_cell("first line\nsecond", 40), "first line...");
}

TEST(ReconnectBackoffTest, DoublesFromHalfASecondToFiveAndGivesUpAfterTheLimit) {
  net::Backoff backoff = reconnect_backoff(std::chrono::seconds(60));
  std::vector<int64_t> waits;
  for (int i = 0; i < 6; ++i) waits.push_back(backoff.next().value().count());
  EXPECT_EQ(waits, (std::vector<int64_t>{500, 1000, 2000, 4000, 5000, 5000}));
  net::Backoff brief = reconnect_backoff(std::chrono::seconds(0));
  ASSERT_TRUE(brief.next().has_value());  // the first loss starts the clock
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(brief.next().has_value());
}

}  // namespace
}  // namespace mixtrain::cli
