// Why: Prometheus scrapes each worker's /metrics (DESIGN.md §7) for the
// training health of the task it runs (loss, loss scale, overflows,
// NaN/Inf events, memory, collectives, MFU, the gradient range and fp8
// scaling) and for the agent itself.
// The task's series carry job_id and rank labels and are removed when the
// task ends, so a dashboard never shows a finished rank as still running.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>
#include "worker/child_messages.h"
#include "proto/mixtrain.pb.h"

namespace mixtrain::worker {

// How a finished task is named in logs and in
// mixtrain_worker_tasks_total{outcome}: "succeeded", "cancelled", or
// "failed" for anything else.
const char* task_outcome_label(v1::TaskOutcome outcome);

class WorkerMetrics {
 public:
  WorkerMetrics();

  // mixtrain_worker_connected: 1 while the coordinator knows this agent
  // (registered, and its last heartbeat or task stream did not fail).
  void set_connected(bool connected);

  // What a task's series need to know of it.
  struct TaskInfo {
    std::string job_id;
    int rank = 0;
    double peak_flops_per_second = 0.0;    // MFU is exported when > 0
    std::optional<double> min_loss_scale;  // dynamic loss scaling: mixtrain_loss_scale_min
  };

  // Creates the series of a task (labels job_id, rank), every labelled
  // counter at 0 (its gauges appear with their first value), and marks the
  // worker busy; ends an earlier task's series first.
  void begin_task(const TaskInfo& info);
  // Updates the current task's series from one step; ignored without a task.
  void on_step(const StepReport& step);
  // Sets mixtrain_val_loss; ignored without a task.
  void on_eval(const EvalProgress& eval);
  // Removes every series of the current task, counts it in
  // mixtrain_worker_tasks_total{outcome} and marks the worker idle.
  void end_task(v1::TaskOutcome outcome);

  // Every series in the Prometheus text format (version 0.0.4).
  std::string render() const;

 private:
  // The current task's series and what turns cumulative counts into increments.
  struct TaskSeries {
    std::map<std::string, std::string> labels;  // job_id, rank
    double peak_flops = 0.0;
    // Gauges: null until their first value (set_gauge).
    prometheus::Gauge* train_loss = nullptr;
    prometheus::Gauge* val_loss = nullptr;
    prometheus::Gauge* loss_scale = nullptr;
    prometheus::Gauge* grad_norm = nullptr;
    prometheus::Gauge* learning_rate = nullptr;
    prometheus::Gauge* mfu = nullptr;
    prometheus::Counter* overflow_steps = nullptr;
    prometheus::Counter* steps = nullptr;
    prometheus::Counter* tokens = nullptr;
    prometheus::Counter* gemm_fallbacks = nullptr;
    int64_t gemm_fallbacks_reported = 0;
    prometheus::Histogram* step_duration = nullptr;
    std::array<prometheus::Histogram*, kNumCommOps> collective_seconds{};
    // Precision telemetry: created with the first report that has it.
    std::array<prometheus::Histogram*, kGradientGroups> gradient_log2{};
    std::array<prometheus::Histogram*, kGradientGroups> fp8_activation_log2{};
    prometheus::Gauge* gradient_zero_ratio = nullptr;
    prometheus::Gauge* gradient_subnormal_ratio = nullptr;
    prometheus::Gauge* gradient_headroom = nullptr;
    std::array<prometheus::Gauge*, kFp8TensorKinds> fp8_amax{};
    std::array<prometheus::Gauge*, kFp8TensorKinds> fp8_scale_log2{};
    std::array<prometheus::Counter*, kFp8TensorKinds> fp8_saturated{};
    std::array<int64_t, kFp8TensorKinds> fp8_saturated_reported{};
    CommStats comm_reported;                      // what the collective counters hold so far
    std::vector<std::function<void()>> removers;  // one per series
  };

  // A series of `family` with the task's labels plus `extra`, removed at end_task.
  template <typename T>
  T& add(TaskSeries& task, prometheus::Family<T>& family,
         const std::map<std::string, std::string>& extra, std::vector<double> buckets = {});
  // Sets the task's gauge in `family` to a finite `value`, creating the
  // series at its first value: a dashboard or alert never sees a loss
  // scale, loss or learning rate of 0 that no step reported.
  void set_gauge(TaskSeries& task, prometheus::Gauge*& gauge,
                 prometheus::Family<prometheus::Gauge>& family, double value);
  // The existing series of `family` with the task's labels plus `extra`.
  template <typename T>
  static T& series(const TaskSeries& task, prometheus::Family<T>& family,
                   const std::map<std::string, std::string>& extra);
  void end_task_locked(const char* outcome) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The gradient-range and fp8 series of one step's report.
  void on_precision(TaskSeries& task, const StepProgress& progress);
  // Observes each group's counts into `family`'s series of that group
  // (created in `series` at the first report).
  void observe_groups(TaskSeries& task, prometheus::Family<prometheus::Histogram>& family,
                      std::array<prometheus::Histogram*, kGradientGroups>& series,
                      const std::array<MagnitudeHistogram, kGradientGroups>& groups);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>& train_loss_;
  prometheus::Family<prometheus::Gauge>& val_loss_;
  prometheus::Family<prometheus::Gauge>& loss_scale_;
  prometheus::Family<prometheus::Gauge>& loss_scale_min_;
  prometheus::Family<prometheus::Counter>& overflow_steps_;
  prometheus::Family<prometheus::Counter>& nonfinite_events_;
  prometheus::Family<prometheus::Gauge>& grad_norm_;
  prometheus::Family<prometheus::Gauge>& learning_rate_;
  prometheus::Family<prometheus::Counter>& steps_;
  prometheus::Family<prometheus::Counter>& tokens_;
  prometheus::Family<prometheus::Histogram>& step_duration_;
  prometheus::Family<prometheus::Gauge>& memory_;
  prometheus::Family<prometheus::Gauge>& memory_peak_;
  prometheus::Family<prometheus::Counter>& collective_bytes_;
  prometheus::Family<prometheus::Histogram>& collective_seconds_;
  prometheus::Family<prometheus::Gauge>& mfu_;
  prometheus::Family<prometheus::Histogram>& gradient_log2_;
  prometheus::Family<prometheus::Histogram>& fp8_activation_log2_;
  prometheus::Family<prometheus::Gauge>& gradient_zero_ratio_;
  prometheus::Family<prometheus::Gauge>& gradient_subnormal_ratio_;
  prometheus::Family<prometheus::Gauge>& gradient_headroom_;
  prometheus::Family<prometheus::Gauge>& fp8_amax_;
  prometheus::Family<prometheus::Gauge>& fp8_scale_log2_;
  prometheus::Family<prometheus::Counter>& fp8_saturated_;
  prometheus::Family<prometheus::Counter>& gemm_fallbacks_;
  prometheus::Gauge& up_;
  prometheus::Gauge& busy_;
  prometheus::Gauge& connected_;
  prometheus::Family<prometheus::Counter>& tasks_;

  absl::Mutex mu_;
  std::optional<TaskSeries> task_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mixtrain::worker
