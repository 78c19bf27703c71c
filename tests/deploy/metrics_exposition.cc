// Why: the deploy checks need the exact metric text the project serves,
// without a cluster: this prints the worker's registry (a task of two ranks'
// worth of series after one clean step, one overflow step and an
// evaluation, so every family has samples; the clean step carries the
// gradient-range and fp8 telemetry) and then the coordinator's, in
// the Prometheus text format, for `promtool check metrics` and for the
// dashboard check's list of exported names.
#include <iostream>
#include <map>

#include "server/coordinator_metrics.h"
#include "worker/worker_metrics.h"

namespace {

mixtrain::worker::StepReport step(int64_t n, bool skipped) {
  mixtrain::worker::StepReport out;
  out.progress.step = n;
  out.progress.steps = 100;
  out.progress.loss = 2.5;
  out.progress.loss_scale = skipped ? 32768 : 65536;
  out.progress.lr = 1e-3;
  out.progress.grad_norm = 0.5;
  out.progress.skipped = skipped;
  if (skipped) {
    out.progress.nonfinite_kind = "inf";
    out.progress.nonfinite_where = "grads";
  }
  out.progress.seconds = 0.1;
  out.rank_tokens = 512;
  out.model_flops = 1e9;
  for (int op = 0; op < mixtrain::kNumCommOps; ++op) {
    out.comm.ops[op].calls = n;
    out.comm.ops[op].bytes_sent = 1024 * n;
    out.comm.ops[op].seconds = 0.01 * static_cast<double>(n);
  }
  return out;
}

}  // namespace

int main() {
  mixtrain::worker::WorkerMetrics worker;
  worker.set_connected(true);
  worker.begin_task({"job-1", 0, 1e12, 1.0});
  mixtrain::worker::StepReport stats = step(1, false);
  mixtrain::GradientRange& range = stats.progress.gradient_range.emplace();
  range.dtype = mixtrain::DType::kF16;
  range.groups[1].buckets[30] = 100;
  range.groups[1].zeros = 5;
  range.groups[1].amax = 1e-3f;
  range.fp8_activations.emplace()[2].buckets[45] = 7;
  stats.progress.fp8.emplace();
  (*stats.progress.fp8)[0] = {3.5f, 128.0f, 2};
  worker.on_step(stats);
  worker.on_step(step(2, true));
  worker.on_eval({2, 2.4});
  std::cout << worker.render();

  namespace v1 = mixtrain::v1;
  mixtrain::server::CoordinatorMetrics coordinator("test");
  std::cout << coordinator.render({{v1::JOB_STATE_RUNNING, 1}}, {{v1::WORKER_STATE_BUSY, 2}});
  return 0;
}
