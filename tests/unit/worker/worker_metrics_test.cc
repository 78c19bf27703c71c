// Why: dashboards and alerts read the worker's /metrics by the names of
// DESIGN.md §7; these tests render the registry after a task's steps and
// check the series with their job_id and rank labels, the counters that
// add up across steps, and that a finished task leaves no series behind.
#include "worker/worker_metrics.h"

#include <gtest/gtest.h>

#include <map>

namespace mixtrain::worker {
namespace {

bool has(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

// `name{labels} value` as the text format writes it: labels sorted by name,
// job_id="job-7" and rank="1" among them.
std::string sample(const std::string& name, std::map<std::string, std::string> labels,
                   const std::string& value) {
  labels.emplace("job_id", "job-7");
  labels.emplace("rank", "1");
  std::string out = name + "{";
  for (const auto& [key, text] : labels) out += key + "=\"" + text + "\",";
  out.back() = '}';
  return out + " " + value;
}

StepReport step(int64_t n, bool skipped) {
  StepReport out;
  out.progress.step = n;
  out.progress.steps = 100;
  out.progress.loss = 2.5;
  out.progress.loss_scale = 1024;
  out.progress.lr = 0.001;
  out.progress.grad_norm = skipped ? 0.0 : 0.75;
  out.progress.skipped = skipped;
  if (skipped) {
    out.progress.nonfinite_kind = "inf";
    out.progress.nonfinite_where = "grads";
  }
  out.progress.seconds = 0.2;
  out.rank_tokens = 64;
  out.model_flops = 1e9;
  out.memory.current[0][static_cast<int>(MemoryCategory::kParams)] = 4096;
  out.memory.peak_total[0] = 10000;
  out.memory.peak[0][static_cast<int>(MemoryCategory::kParams)] = 8192;
  out.memory.current[1][static_cast<int>(MemoryCategory::kData)] = 300;
  out.comm[CommOp::kAllReduce].calls = 4 * n;
  out.comm[CommOp::kAllReduce].bytes_sent = 1000 * n;
  out.comm[CommOp::kAllReduce].seconds = 0.5 * static_cast<double>(n);
  out.gemm_fallbacks = 3 * n;  // cumulative, as the backend counts
  return out;
}

TEST(WorkerMetricsTest, TaskSeriesCarryLabelsAndAccumulate) {
  WorkerMetrics metrics;
  metrics.begin_task({"job-7", 1, 1e10, 1.0});
  metrics.on_step(step(1, false));
  metrics.on_step(step(2, true));
  metrics.on_eval(EvalProgress{2, 2.25});
  const std::string text = metrics.render();
  EXPECT_TRUE(has(text, sample("mixtrain_train_loss", {}, "2.5"))) << text;
  EXPECT_TRUE(has(text, sample("mixtrain_val_loss", {}, "2.25"))) << text;
  EXPECT_TRUE(has(text, sample("mixtrain_loss_scale", {}, "1024"))) << text;
  EXPECT_TRUE(has(text, sample("mixtrain_grad_norm", {}, "0.75"))) << text;
  EXPECT_TRUE(has(text, sample("mixtrain_learning_rate", {}, "0.001"))) << text;
  EXPECT_TRUE(has(text, sample("mixtrain_steps_total", {}, "2"))) << text;
  EXPECT_TRUE(has(text, sample("mixtrain_tokens_total", {}, "128"))) << text;
  EXPECT_TRUE(has(text, sample("mixtrain_gemm_fallbacks_total", {}, "6"))) << text;
  EXPECT_TRUE(has(text, sample("mixtrain_overflow_steps_total", {}, "1"))) << text;
  EXPECT_TRUE(has(
      text, sample("mixtrain_nonfinite_events_total", {{"kind", "inf"}, {"where", "grads"}}, "1")))
      << text;
  EXPECT_TRUE(has(
      text, sample("mixtrain_nonfinite_events_total", {{"kind", "nan"}, {"where", "loss"}}, "0")))
      << text;
  EXPECT_TRUE(has(text, sample("mixtrain_step_duration_seconds_count", {}, "2"))) << text;
  EXPECT_TRUE(
      has(text, sample("mixtrain_memory_bytes", {{"kind", "params"}, {"pool", "device"}}, "4096")))
      << text;
  EXPECT_TRUE(has(
      text, sample("mixtrain_memory_bytes", {{"kind", "optimizer_state"}, {"pool", "host"}}, "0")))
      << text;
  EXPECT_TRUE(has(
      text, sample("mixtrain_memory_peak_bytes", {{"kind", "total"}, {"pool", "device"}}, "10000")))
      << text;
  // Issue 29: tokens held in memory, a host category only.
  EXPECT_TRUE(
      has(text, sample("mixtrain_memory_bytes", {{"kind", "data"}, {"pool", "host"}}, "300")))
      << text;
  EXPECT_FALSE(has(text, "kind=\"data\",pool=\"device\"")) << text;
  EXPECT_TRUE(has(
      text, sample("mixtrain_memory_peak_bytes", {{"kind", "params"}, {"pool", "device"}}, "8192")))
      << text;
  // Cumulative counts from the child become the counter's total, not a sum of totals.
  EXPECT_TRUE(has(text, sample("mixtrain_collective_bytes_total", {{"op", "all_reduce"}}, "2000")))
      << text;
  // Per step: 0.5 s of all-reduce in each of the two steps; ops not called
  // in a step observe nothing.
  EXPECT_TRUE(
      has(text, sample("mixtrain_collective_duration_seconds_sum", {{"op", "all_reduce"}}, "1")))
      << text;
  EXPECT_TRUE(
      has(text, sample("mixtrain_collective_duration_seconds_count", {{"op", "all_reduce"}}, "2")))
      << text;
  EXPECT_TRUE(
      has(text, sample("mixtrain_collective_duration_seconds_count", {{"op", "all_gather"}}, "0")))
      << text;
  EXPECT_TRUE(has(text, sample("mixtrain_loss_scale_min", {}, "1"))) << text;
  // 1e9 FLOPs in 0.2 s against a 1e10 FLOP/s peak.
  EXPECT_TRUE(has(text, sample("mixtrain_model_flops_utilization_ratio", {}, "0.5"))) << text;
  EXPECT_TRUE(has(text, "mixtrain_worker_busy 1")) << text;
  EXPECT_TRUE(has(text, "mixtrain_worker_up 1")) << text;
}

TEST(WorkerMetricsTest, EndedTaskLeavesNoSeries) {
  WorkerMetrics metrics;
  metrics.begin_task({"job-8", 0, 0.0, std::nullopt});
  metrics.on_step(step(1, true));
  metrics.on_eval(EvalProgress{1, 3.0});
  metrics.end_task(v1::TASK_OUTCOME_SUCCEEDED);
  const std::string text = metrics.render();
  EXPECT_FALSE(has(text, "job-8")) << text;
  EXPECT_TRUE(has(text, "mixtrain_worker_busy 0")) << text;
  EXPECT_TRUE(has(text, "mixtrain_worker_tasks_total{outcome=\"succeeded\"} 1")) << text;
  EXPECT_TRUE(has(text, "mixtrain_worker_tasks_total{outcome=\"failed\"} 0")) << text;
  // Without a task, reports change nothing.
  metrics.on_step(step(2, false));
  EXPECT_FALSE(has(metrics.render(), "job_id")) << metrics.render();
}

// A scrape between the task's start and its first step sees counters at 0
// but no loss scale, loss or learning rate of 0 (which the min-scale alert
// would take for a collapsed scale); a skipped first step reports no
// gradient norm.
TEST(WorkerMetricsTest, GaugesAppearWithTheirFirstValue) {
  WorkerMetrics metrics;
  metrics.begin_task({"job-7", 1, 1e10, 1.0});
  std::string text = metrics.render();
  EXPECT_TRUE(has(text, sample("mixtrain_steps_total", {}, "0"))) << text;
  EXPECT_TRUE(has(text, sample("mixtrain_loss_scale_min", {}, "1"))) << text;
  for (const char* gauge :
       {"mixtrain_loss_scale{", "mixtrain_train_loss{", "mixtrain_learning_rate{",
        "mixtrain_grad_norm{", "mixtrain_model_flops_utilization_ratio{", "mixtrain_val_loss{"}) {
    EXPECT_FALSE(has(text, gauge)) << gauge;
  }
  metrics.on_step(step(1, true));
  text = metrics.render();
  EXPECT_TRUE(has(text, sample("mixtrain_loss_scale", {}, "1024"))) << text;
  EXPECT_FALSE(has(text, "mixtrain_grad_norm{")) << text;
}

TEST(WorkerMetricsTest, MalformedNonfiniteKindAddsNoSeries) {
  WorkerMetrics metrics;
  metrics.begin_task({"job-9", 0, 0.0, std::nullopt});
  StepReport odd = step(1, true);
  odd.progress.nonfinite_kind = "weird";
  metrics.on_step(odd);
  EXPECT_FALSE(has(metrics.render(), "weird"));
  EXPECT_FALSE(has(metrics.render(), "mixtrain_model_flops_utilization_ratio{"));
  // No dynamic loss scaling, no minimum to alert on.
  EXPECT_FALSE(has(metrics.render(), "mixtrain_loss_scale_min{"));
  metrics.end_task(v1::TASK_OUTCOME_FAILED);
  EXPECT_FALSE(has(metrics.render(), "job-9"));
}

// The precision telemetry: the gradient histogram by group (log2 buckets,
// cumulative le), its ratios, and the fp8 series by tensor kind, whose
// saturation counter adds the increments of the cumulative counts.
TEST(WorkerMetricsTest, PrecisionTelemetrySeries) {
  WorkerMetrics metrics;
  metrics.begin_task({"job-7", 1, 0.0, std::nullopt});
  EXPECT_FALSE(has(metrics.render(), "mixtrain_gradient_log2_magnitude")) << "no stats step yet";
  StepReport report = step(1, false);
  GradientRange& range = report.progress.gradient_range.emplace();
  range.dtype = DType::kF16;
  MagnitudeHistogram& mlp = range.groups[static_cast<size_t>(GradientGroup::kMlp)];
  mlp.buckets[static_cast<size_t>(-10 - MagnitudeHistogram::kMinLog2)] = 6;  // (2^-11, 2^-10]
  mlp.buckets[static_cast<size_t>(-3 - MagnitudeHistogram::kMinLog2)] = 2;
  mlp.zeros = 2;
  mlp.subnormals = 1;
  mlp.amax = 0.125f;
  range.fp8_activations.emplace();
  (*range.fp8_activations)[static_cast<size_t>(GradientGroup::kAttention)]
      .buckets[static_cast<size_t>(8 - MagnitudeHistogram::kMinLog2)] = 5;  // (128, 256]
  report.progress.fp8.emplace();
  (*report.progress.fp8)[1] = Fp8KindStats{0.5f, 896.0f, 3};
  metrics.on_step(report);
  (*report.progress.fp8)[1].saturated = 10;
  report.progress.gradient_range.reset();
  metrics.on_step(report);
  const std::string text = metrics.render();
  // (The text format writes le after the other labels.)
  auto bucket = [](const std::string& group, const std::string& le, const std::string& count) {
    return "mixtrain_gradient_log2_magnitude_bucket{group=\"" + group +
           "\",job_id=\"job-7\",rank=\"1\",le=\"" + le + "\"} " + count;
  };
  EXPECT_TRUE(has(text, bucket("mlp", "-11", "0"))) << text;
  EXPECT_TRUE(has(text, bucket("mlp", "-10", "6"))) << text;
  EXPECT_TRUE(has(text, bucket("mlp", "-3", "8"))) << text;
  EXPECT_TRUE(has(text, bucket("attention", "20", "0"))) << text;
  EXPECT_TRUE(has(text,
                  "mixtrain_fp8_activation_log2_magnitude_bucket{group=\"attention\","
                  "job_id=\"job-7\",rank=\"1\",le=\"8\"} 5"))
      << text;
  EXPECT_TRUE(has(text, sample("mixtrain_gradient_zero_ratio", {}, "0.2"))) << text;
  EXPECT_TRUE(has(text, sample("mixtrain_gradient_subnormal_ratio", {}, "0.1"))) << text;
  EXPECT_TRUE(has(text, sample("mixtrain_gradient_headroom_log2", {}, "18.9"))) << text;
  EXPECT_TRUE(has(text, sample("mixtrain_fp8_amax", {{"tensor", "weight"}}, "0.5"))) << text;
  EXPECT_TRUE(has(text, sample("mixtrain_fp8_saturated_total", {{"tensor", "weight"}}, "10")))
      << text;
  EXPECT_TRUE(has(text, sample("mixtrain_fp8_scale_log2", {{"tensor", "weight"}}, "9.807")))
      << text;
  metrics.end_task(v1::TASK_OUTCOME_SUCCEEDED);
  EXPECT_FALSE(has(metrics.render(), "job-7"));
}

}  // namespace
}  // namespace mixtrain::worker
