// Why: see worker_metrics.h.
#include "worker/worker_metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cmath>

namespace mixtrain::worker {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

// Step times from 10 ms (tiny models) to 2 min (large ones on CPU).
std::vector<double> step_buckets() {
  return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}

// One op's collectives within one step: from 100 µs (a small all-reduce on
// loopback) to a minute (a large model's all-gather over a slow network).
std::vector<double> collective_buckets() {
  return {0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60};
}

// The gradient range's buckets as the histogram's upper bounds: log2 of
// the magnitude, one per power of two (MagnitudeHistogram's buckets).
std::vector<double> log2_buckets() {
  std::vector<double> bounds;
  for (int b = MagnitudeHistogram::kMinLog2; b <= MagnitudeHistogram::kMaxLog2; ++b)
    bounds.push_back(b);
  return bounds;
}

// mixtrain_memory_peak_bytes' kind for a pool's total.
constexpr char kTotalKind[] = "total";

// The outcome of a task that a new one ended before it reported its own.
constexpr char kReplaced[] = "replaced";

}  // namespace

const char* task_outcome_label(v1::TaskOutcome outcome) {
  switch (outcome) {
    case v1::TASK_OUTCOME_SUCCEEDED:
      return "succeeded";
    case v1::TASK_OUTCOME_CANCELLED:
      return "cancelled";
    case v1::TASK_OUTCOME_PREEMPTED:
      return "preempted";
    default:
      return "failed";
  }
}

WorkerMetrics::WorkerMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      train_loss_(BuildGauge()
                      .Name("mixtrain_train_loss")
                      .Help("Mean training loss of the last step")
                      .Register(*registry_)),
      val_loss_(BuildGauge()
                    .Name("mixtrain_val_loss")
                    .Help("Validation loss of the last evaluation")
                    .Register(*registry_)),
      loss_scale_(BuildGauge()
                      .Name("mixtrain_loss_scale")
                      .Help("Loss scale after the last step")
                      .Register(*registry_)),
      loss_scale_min_(BuildGauge()
                          .Name("mixtrain_loss_scale_min")
                          .Help("The job's precision.min_scale (dynamic loss scaling only)")
                          .Register(*registry_)),
      overflow_steps_(BuildCounter()
                          .Name("mixtrain_overflow_steps_total")
                          .Help("Steps skipped because of inf/NaN gradients")
                          .Register(*registry_)),
      nonfinite_events_(
          BuildCounter()
              .Name("mixtrain_nonfinite_events_total")
              .Help("Non-finite values found, by kind (nan|inf) and where (loss|grads)")
              .Register(*registry_)),
      grad_norm_(BuildGauge()
                     .Name("mixtrain_grad_norm")
                     .Help("Global L2 norm of the unscaled gradients of the last applied step")
                     .Register(*registry_)),
      learning_rate_(BuildGauge()
                         .Name("mixtrain_learning_rate")
                         .Help("Learning rate of the last step")
                         .Register(*registry_)),
      steps_(BuildCounter()
                 .Name("mixtrain_steps_total")
                 .Help("Training steps done by this task (applied and skipped)")
                 .Register(*registry_)),
      tokens_(BuildCounter()
                  .Name("mixtrain_tokens_total")
                  .Help("Training tokens this rank processed")
                  .Register(*registry_)),
      step_duration_(BuildHistogram()
                         .Name("mixtrain_step_duration_seconds")
                         .Help("Wall time of one training step")
                         .Register(*registry_)),
      memory_(BuildGauge()
                  .Name("mixtrain_memory_bytes")
                  .Help("Bytes the engine holds, by pool (device|host) and kind")
                  .Register(*registry_)),
      memory_peak_(BuildGauge()
                       .Name("mixtrain_memory_peak_bytes")
                       .Help("Peak of the bytes the engine held in a pool, by kind (a "
                             "category's own peak) and in all (kind total)")
                       .Register(*registry_)),
      collective_bytes_(BuildCounter()
                            .Name("mixtrain_collective_bytes_total")
                            .Help("Bytes this rank sent in collectives, by op")
                            .Register(*registry_)),
      collective_seconds_(
          BuildHistogram()
              .Name("mixtrain_collective_duration_seconds")
              .Help("Seconds this rank spent in one op's collectives within a step, by op")
              .Register(*registry_)),
      mfu_(BuildGauge()
               .Name("mixtrain_model_flops_utilization_ratio")
               .Help("Model FLOPs of the last step per second over the device's peak")
               .Register(*registry_)),
      gradient_log2_(BuildHistogram()
                         .Name("mixtrain_gradient_log2_magnitude")
                         .Help("log2 |g| of this rank's stored gradients (loss scale included), "
                               "every precision.stats_every steps, by layer group; zeros apart")
                         .Register(*registry_)),
      fp8_activation_log2_(
          BuildHistogram()
              .Name("mixtrain_fp8_activation_log2_magnitude")
              .Help("log2 |x| of the fp8 (E4M3) values of this rank's quantized GEMM inputs "
                    "in a step, every precision.stats_every steps, by layer group; zeros apart")
              .Register(*registry_)),
      gradient_zero_ratio_(BuildGauge()
                               .Name("mixtrain_gradient_zero_ratio")
                               .Help("Fraction of the stored gradient elements that are zero")
                               .Register(*registry_)),
      gradient_subnormal_ratio_(
          BuildGauge()
              .Name("mixtrain_gradient_subnormal_ratio")
              .Help("Fraction of the stored gradient elements subnormal in their dtype")
              .Register(*registry_)),
      gradient_headroom_(BuildGauge()
                             .Name("mixtrain_gradient_headroom_log2")
                             .Help("log2(max finite of the gradient dtype / gradient amax)")
                             .Register(*registry_)),
      fp8_amax_(BuildGauge()
                    .Name("mixtrain_fp8_amax")
                    .Help("Largest |x| of the fp8-quantized tensors of a kind in the last step")
                    .Register(*registry_)),
      fp8_scale_log2_(BuildGauge()
                          .Name("mixtrain_fp8_scale_log2")
                          .Help("log2 of the smallest per-tensor fp8 scale of a kind")
                          .Register(*registry_)),
      fp8_saturated_(BuildCounter()
                         .Name("mixtrain_fp8_saturated_total")
                         .Help("Elements that fp8 quantization clamped to the format's max")
                         .Register(*registry_)),
      gemm_fallbacks_(BuildCounter()
                          .Name("mixtrain_gemm_fallbacks_total")
                          .Help("GEMMs that took a slower path than the device offers: an "
                                "unfused bias or GELU, an fp8 GEMM dequantized to bf16")
                          .Register(*registry_)),
      up_(BuildGauge()
              .Name("mixtrain_worker_up")
              .Help("1 while the worker agent runs")
              .Register(*registry_)
              .Add({})),
      busy_(BuildGauge()
                .Name("mixtrain_worker_busy")
                .Help("1 while the worker runs a task")
                .Register(*registry_)
                .Add({})),
      connected_(BuildGauge()
                     .Name("mixtrain_worker_connected")
                     .Help("1 while the worker is registered with the coordinator")
                     .Register(*registry_)
                     .Add({})),
      tasks_(BuildCounter()
                 .Name("mixtrain_worker_tasks_total")
                 .Help("Tasks this worker finished, by outcome")
                 .Register(*registry_)) {
  up_.Set(1);
  // Every outcome from 0.
  for (const v1::TaskOutcome outcome : {v1::TASK_OUTCOME_SUCCEEDED, v1::TASK_OUTCOME_FAILED,
                                        v1::TASK_OUTCOME_CANCELLED, v1::TASK_OUTCOME_PREEMPTED})
    tasks_.Add({{"outcome", task_outcome_label(outcome)}});
  tasks_.Add({{"outcome", kReplaced}});
}

void WorkerMetrics::set_connected(bool connected) { connected_.Set(connected ? 1 : 0); }

template <typename T>
T& WorkerMetrics::add(TaskSeries& task, prometheus::Family<T>& family,
                      const std::map<std::string, std::string>& extra,
                      std::vector<double> buckets) {
  std::map<std::string, std::string> labels = task.labels;
  labels.insert(extra.begin(), extra.end());
  T* metric = nullptr;
  if constexpr (std::is_same_v<T, prometheus::Histogram>) {
    metric = &family.Add(labels, prometheus::Histogram::BucketBoundaries(std::move(buckets)));
  } else {
    metric = &family.Add(labels);
  }
  task.removers.push_back([&family, metric] { family.Remove(metric); });
  return *metric;
}

template <typename T>
T& WorkerMetrics::series(const TaskSeries& task, prometheus::Family<T>& family,
                         const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> labels = task.labels;
  labels.insert(extra.begin(), extra.end());
  return family.Add(labels);  // the one begin_task made
}

void WorkerMetrics::set_gauge(TaskSeries& task, prometheus::Gauge*& gauge,
                              prometheus::Family<prometheus::Gauge>& family, double value) {
  if (!std::isfinite(value)) return;
  if (gauge == nullptr) gauge = &add(task, family, {});
  gauge->Set(value);
}

void WorkerMetrics::begin_task(const TaskInfo& info) {
  absl::MutexLock lock(&mu_);
  if (task_) end_task_locked(kReplaced);
  task_ = TaskSeries();
  TaskSeries& task = *task_;
  task.labels = {{"job_id", info.job_id}, {"rank", std::to_string(info.rank)}};
  task.peak_flops = info.peak_flops_per_second;
  if (info.min_loss_scale) add(task, loss_scale_min_, {}).Set(*info.min_loss_scale);
  task.overflow_steps = &add(task, overflow_steps_, {});
  task.steps = &add(task, steps_, {});
  task.tokens = &add(task, tokens_, {});
  task.gemm_fallbacks = &add(task, gemm_fallbacks_, {});
  task.step_duration = &add(task, step_duration_, {}, step_buckets());
  for (const char* kind : {"nan", "inf"}) {
    for (const char* where : {"loss", "grads"})
      add(task, nonfinite_events_, {{"kind", kind}, {"where", where}});
  }
  for (int op = 0; op < kNumCommOps; ++op) {
    const char* name = comm_op_name(static_cast<CommOp>(op));
    add(task, collective_bytes_, {{"op", name}});
    task.collective_seconds[op] =
        &add(task, collective_seconds_, {{"op", name}}, collective_buckets());
  }
  for (int p = 0; p < kNumMemoryPools; ++p) {
    const auto pool = static_cast<MemoryPool>(p);
    add(task, memory_peak_, {{"pool", memory_pool_name(pool)}, {"kind", kTotalKind}});
    for (int c = 0; c < kNumMemoryCategories; ++c) {
      const auto category = static_cast<MemoryCategory>(c);
      if (!memory_category_in_pool(pool, category)) continue;
      const std::map<std::string, std::string> labels{{"pool", memory_pool_name(pool)},
                                                      {"kind", memory_category_name(category)}};
      add(task, memory_, labels);
      add(task, memory_peak_, labels);
    }
  }
  busy_.Set(1);
}

void WorkerMetrics::on_step(const StepReport& step) {
  absl::MutexLock lock(&mu_);
  if (!task_) return;
  TaskSeries& task = *task_;
  const StepProgress& p = step.progress;
  set_gauge(task, task.train_loss, train_loss_, p.loss);
  set_gauge(task, task.loss_scale, loss_scale_, p.loss_scale);
  set_gauge(task, task.learning_rate, learning_rate_, p.lr);
  if (!p.skipped) set_gauge(task, task.grad_norm, grad_norm_, p.grad_norm);
  task.steps->Increment();
  task.tokens->Increment(step.rank_tokens);
  task.gemm_fallbacks->Increment(static_cast<double>(
      std::max<int64_t>(0, step.gemm_fallbacks - task.gemm_fallbacks_reported)));
  task.gemm_fallbacks_reported = std::max(task.gemm_fallbacks_reported, step.gemm_fallbacks);
  task.step_duration->Observe(p.seconds);
  if (p.skipped) task.overflow_steps->Increment();
  // Only the four series begin_task made: a malformed report adds none.
  if ((p.nonfinite_kind == "nan" || p.nonfinite_kind == "inf") &&
      (p.nonfinite_where == "loss" || p.nonfinite_where == "grads")) {
    series(task, nonfinite_events_, {{"kind", p.nonfinite_kind}, {"where", p.nonfinite_where}})
        .Increment();
  }
  if (task.peak_flops > 0 && p.seconds > 0)
    set_gauge(task, task.mfu, mfu_, step.model_flops / p.seconds / task.peak_flops);
  for (int p_index = 0; p_index < kNumMemoryPools; ++p_index) {
    const auto pool = static_cast<MemoryPool>(p_index);
    const char* pool_name = memory_pool_name(pool);
    series(task, memory_peak_, {{"pool", pool_name}, {"kind", kTotalKind}})
        .Set(static_cast<double>(step.memory.peak_total[p_index]));
    for (int c = 0; c < kNumMemoryCategories; ++c) {
      const auto category = static_cast<MemoryCategory>(c);
      if (!memory_category_in_pool(pool, category)) continue;
      const std::map<std::string, std::string> labels{{"pool", pool_name},
                                                      {"kind", memory_category_name(category)}};
      series(task, memory_, labels).Set(static_cast<double>(step.memory.current[p_index][c]));
      series(task, memory_peak_, labels).Set(static_cast<double>(step.memory.peak[p_index][c]));
    }
  }
  for (int op = 0; op < kNumCommOps; ++op) {
    const char* name = comm_op_name(static_cast<CommOp>(op));
    const CommOpStats& now = step.comm.ops[op];
    CommOpStats& reported = task.comm_reported.ops[op];
    series(task, collective_bytes_, {{"op", name}})
        .Increment(static_cast<double>(std::max<int64_t>(0, now.bytes_sent - reported.bytes_sent)));
    if (now.calls > reported.calls)
      task.collective_seconds[op]->Observe(std::max(0.0, now.seconds - reported.seconds));
    reported = now;
  }
  on_precision(task, p);
}

void WorkerMetrics::observe_groups(TaskSeries& task,
                                   prometheus::Family<prometheus::Histogram>& family,
                                   std::array<prometheus::Histogram*, kGradientGroups>& series,
                                   const std::array<MagnitudeHistogram, kGradientGroups>& groups) {
  for (int g = 0; g < kGradientGroups; ++g) {
    const MagnitudeHistogram& counts = groups[static_cast<size_t>(g)];
    prometheus::Histogram*& histogram = series[static_cast<size_t>(g)];
    if (histogram == nullptr) {
      histogram =
          &add(task, family, {{"group", gradient_group_name(static_cast<GradientGroup>(g))}},
               log2_buckets());
    }
    std::vector<double> increments(MagnitudeHistogram::kBuckets + 1, 0.0);  // + the +Inf bucket
    double sum = 0.0;
    for (int b = 0; b < MagnitudeHistogram::kBuckets; ++b) {
      const auto count = static_cast<double>(counts.buckets[static_cast<size_t>(b)]);
      increments[static_cast<size_t>(b)] = count;
      sum += count * (MagnitudeHistogram::kMinLog2 + b);
    }
    histogram->ObserveMultiple(increments, sum);
  }
}

void WorkerMetrics::on_precision(TaskSeries& task, const StepProgress& progress) {
  if (progress.gradient_range) {
    const GradientRange& range = *progress.gradient_range;
    observe_groups(task, gradient_log2_, task.gradient_log2, range.groups);
    if (range.fp8_activations) {
      observe_groups(task, fp8_activation_log2_, task.fp8_activation_log2, *range.fp8_activations);
    }
    set_gauge(task, task.gradient_zero_ratio, gradient_zero_ratio_, range.zero_ratio());
    set_gauge(task, task.gradient_subnormal_ratio, gradient_subnormal_ratio_,
              range.subnormal_ratio());
    set_gauge(task, task.gradient_headroom, gradient_headroom_, range.headroom_log2());
  }
  if (!progress.fp8) return;
  for (int k = 0; k < kFp8TensorKinds; ++k) {
    const auto index = static_cast<size_t>(k);
    const Fp8KindStats& stats = (*progress.fp8)[index];
    const std::map<std::string, std::string> tensor{
        {"tensor", fp8_tensor_kind_name(static_cast<Fp8TensorKind>(k))}};
    if (task.fp8_saturated[index] == nullptr) {
      task.fp8_amax[index] = &add(task, fp8_amax_, tensor);
      task.fp8_scale_log2[index] = &add(task, fp8_scale_log2_, tensor);
      task.fp8_saturated[index] = &add(task, fp8_saturated_, tensor);
    }
    task.fp8_amax[index]->Set(stats.amax);
    if (stats.min_scale > 0.0f) task.fp8_scale_log2[index]->Set(std::log2(stats.min_scale));
    task.fp8_saturated[index]->Increment(static_cast<double>(
        std::max<int64_t>(0, stats.saturated - task.fp8_saturated_reported[index])));
    task.fp8_saturated_reported[index] = stats.saturated;
  }
}

void WorkerMetrics::on_eval(const EvalProgress& eval) {
  absl::MutexLock lock(&mu_);
  if (!task_) return;
  set_gauge(*task_, task_->val_loss, val_loss_, eval.val_loss);
}

void WorkerMetrics::end_task(v1::TaskOutcome outcome) {
  absl::MutexLock lock(&mu_);
  if (task_) end_task_locked(task_outcome_label(outcome));
}

void WorkerMetrics::end_task_locked(const char* outcome) {
  for (const std::function<void()>& remove : task_->removers) remove();
  task_.reset();
  tasks_.Add({{"outcome", outcome}}).Increment();
  busy_.Set(0);
}

std::string WorkerMetrics::render() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace mixtrain::worker
