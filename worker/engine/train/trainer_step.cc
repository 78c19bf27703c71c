// Why: one training step as separate stages on the flat buffers (forward,
// backward, reduce, overflow check, clip, optimizer), so that ZeRO can
// later partition each stage without restructuring the step.
#include "train/trainer.h"

#include <chrono>
#include <cmath>

#include "amp/overflow_report.h"
#include "optim/grad_clip.h"

namespace mixtrain {

StepProgress Trainer::train_step() {
  const auto start = std::chrono::steady_clock::now();
  const int64_t step_index = state_.step;  // 0-based, for the LR schedule
  const int64_t step_number = step_index + 1;
  const std::vector<TokenBatch> batches = sampler_.next_step();
  const float scale = scaler_.scale();
  const float micro_batches = static_cast<float>(batches.size());

  zero_gradients(grads_);
  double loss_sum = 0.0;
  for (const TokenBatch& batch : batches) {
    loss_sum += forward(params_, batch);
    backward(params_, grads_, scale / micro_batches);
  }
  reduce_gradients(grads_);
  const NonFiniteCheck check = check_gradients(grads_);
  const std::string_view bad_tensor =
      check.found ? nonfinite_tensor_name(parameter_names_, check) : std::string_view();
  const StepDecision decision = scaler_.update(check.found, step_number, bad_tensor);

  StepProgress progress;
  progress.step = step_number;
  progress.steps = spec_.train.steps;
  progress.loss = loss_sum / static_cast<double>(batches.size());
  progress.loss_scale = decision.new_scale;
  progress.lr = lr_schedule_.lr_at(step_index);
  progress.skipped = decision.skip;
  if (decision.skip) {
    (check.is_nan ? state_.nan_events : state_.inf_events) += 1;
    if (options_.progress.on_log)
      options_.progress.on_log(describe_overflow(step_number, parameter_names_, check, decision));
  } else {
    const GradClip clipped = clip(grads_, scale);
    progress.grad_norm = clipped.norm;
    optimizer_step(master_, adam_m_, adam_v_, grads_, params_, static_cast<float>(progress.lr),
                   clipped.coefficient / scale);
    state_.optimizer_steps += 1;
  }
  backend_.synchronize();
  state_.step = step_number;
  state_.last_train_loss = progress.loss;

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double tokens = static_cast<double>(sampler_.global_windows_per_step() *
                                            spec_.model.seq_len);
  train_tokens_ += tokens;
  train_seconds_ += seconds;
  progress.tokens_per_second = seconds > 0.0 ? tokens / seconds : 0.0;
  return progress;
}

void Trainer::zero_gradients(const Tensor& grads) { backend_.set_zero(grads); }

float Trainer::forward(const Tensor& params, const TokenBatch& batch) {
  backend_.copy_from_host(tokens_, batch.inputs.data());
  backend_.copy_from_host(targets_, batch.targets.data());
  return gpt_.forward(params, tokens_, targets_);
}

void Trainer::backward(const Tensor& params, const Tensor& grads, float dloss) {
  gpt_.backward(params, grads, dloss);
}

void Trainer::reduce_gradients(const Tensor& /*grads*/) {
  // World size 1: the local gradients are the global sum. Data-parallel
  // ranks all-reduce grads here (ZeRO 2/3: reduce-scatter to the owners).
}

NonFiniteCheck Trainer::check_gradients(const Tensor& grads) {
  std::vector<Tensor> views;
  views.reserve(gpt_.layout().parameters().size());
  for (const ParameterInfo& info : gpt_.layout().parameters())
    views.push_back(parameter_view(grads, info));
  return backend_.unscale_and_check(views, 1.0f);  // a factor of 1 leaves every bit as it is
}

Trainer::GradClip Trainer::clip(const Tensor& grads, float loss_scale) {
  GradClip out;
  out.norm = std::sqrt(backend_.sum_squares(std::span<const Tensor>(&grads, 1))) / loss_scale;
  out.coefficient = clip_coefficient(out.norm, spec_.train.grad_clip);
  return out;
}

void Trainer::optimizer_step(const Tensor& master, const Tensor& m, const Tensor& v,
                             const Tensor& grads, const Tensor& working, float lr,
                             float grad_scale) {
  const bool separate_working_copy = working.data() != master.data();
  std::vector<AdamWParam> params;
  params.reserve(gpt_.layout().parameters().size());
  for (const ParameterInfo& info : gpt_.layout().parameters()) {
    AdamWParam param;
    param.master = parameter_view(master, info);
    param.m = parameter_view(m, info);
    param.v = parameter_view(v, info);
    param.grad = parameter_view(grads, info);
    if (separate_working_copy) param.param_out = parameter_view(working, info);
    param.decay = info.decay;
    params.push_back(std::move(param));
  }
  AdamWHyper hyper = adamw_hyper_;
  hyper.lr = lr;
  adamw_step(backend_, params, hyper, state_.optimizer_steps + 1, grad_scale);
}

}  // namespace mixtrain
