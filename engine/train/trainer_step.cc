// Why: one training step as separate stages (forward, backward with the
// engine reducing gradients unit by unit, overflow check, clip, optimizer),
// each agreed across the data-parallel ranks by the ZeroEngine.
#include <chrono>
#include <cmath>
#include <cstring>

#include "engine/amp/overflow_report.h"
#include "engine/optim/grad_clip.h"
#include "engine/train/trainer.h"

namespace mixtrain {

StepProgress Trainer::train_step() {
  const auto start = std::chrono::steady_clock::now();
  const CommStats comm_before = options_.comm ? options_.comm->stats() : CommStats();
  const int64_t step_index = state_.step;  // 0-based, for the LR schedule
  const int64_t step_number = step_index + 1;
  const std::vector<TokenBatch> batches = sampler_.next_step();
  const float scale = scaler_.scale();
  // Each rank's loss is the mean over its tokens; the ranks' gradients are
  // summed, so each carries 1/(micro-batches * ranks) of the step.
  const float dloss =
      scale / static_cast<float>(batches.size()) / static_cast<float>(zero_.world_size());

  const int64_t stats_every = spec_.precision.stats_every;
  const bool stats_step = stats_every > 0 && step_number % stats_every == 0;
  zero_.begin_step();
  if (fp8_recipe_) fp8_recipe_->begin_step();
  if (fp8_linear_) fp8_linear_->count_activations(stats_step);
  double loss_sum = 0.0;
  for (size_t i = 0; i < batches.size(); ++i) {
    ModelWeights& weights = zero_.train_weights(/*reduce=*/i + 1 == batches.size());
    loss_sum += forward(weights, batches[i]);
    model_->backward(weights, dloss);
  }
  zero_.finish_gradients();
  std::optional<GradientRange> gradient_range;
  if (stats_step) {
    std::vector<size_t> parameters;
    for (const PartitionSegment& segment : zero_.optimizer_partition().segments())
      parameters.push_back(segment.parameter);
    gradient_range = measure_gradient_range(backend_, model_->layout(),
                                            zero_.owned_gradient_views(), parameters, step_number);
    if (fp8_linear_) {
      fp8_linear_->count_activations(false);
      auto& groups = gradient_range->fp8_activations.emplace();
      const std::vector<MagnitudeHistogram>& counts = fp8_linear_->activation_counts();
      for (size_t gemm = 0; gemm < counts.size(); ++gemm) {
        const GradientGroup group =
            gradient_group(model_->fp8_gemm_weight(static_cast<int64_t>(gemm)));
        groups[static_cast<size_t>(group)].add(counts[gemm]);
      }
    }
    last_gradient_range_ = gradient_range;
  }
  if (fp8_recipe_) {
    fp8_linear_->record_step();
    zero_.all_reduce_values(fp8_recipe_->step_amaxes(), ReduceOp::kMax);
    fp8_recipe_->end_step();
  }
  const NonFiniteCheck check = zero_.check_gradients();
  const std::string_view bad_tensor =
      check.found ? nonfinite_tensor_name(parameter_names_, check) : std::string_view();
  const StepDecision decision = scaler_.update(check.found, step_number, bad_tensor);

  StepProgress progress;
  progress.step = step_number;
  progress.steps = spec_.train.steps;
  progress.loss = mean_over_ranks(loss_sum / static_cast<double>(batches.size()));
  progress.loss_scale = decision.new_scale;
  progress.lr = lr_schedule_.lr_at(step_index);
  progress.skipped = decision.skip;
  progress.gradient_range = std::move(gradient_range);
  if (fp8_recipe_) {
    progress.fp8.emplace();
    for (int k = 0; k < kFp8TensorKinds; ++k)
      (*progress.fp8)[static_cast<size_t>(k)] = fp8_recipe_->stats(static_cast<Fp8TensorKind>(k));
  }
  if (decision.skip) {
    (check.is_nan ? state_.nan_events : state_.inf_events) += 1;
    progress.nonfinite_kind = check.is_nan ? "nan" : "inf";
    progress.nonfinite_where = std::isfinite(progress.loss) ? "grads" : "loss";
    log(describe_overflow(step_number, parameter_names_, check, decision));
  } else {
    const GradClip clipped = clip(scale);
    progress.grad_norm = clipped.norm;
    AdamWConfig adamw = adamw_config_;
    adamw.lr = static_cast<float>(progress.lr);
    adamw.step = state_.optimizer_steps + 1;
    adamw.grad_scale = clipped.coefficient / scale;
    zero_.optimizer_step(adamw);
    state_.optimizer_steps += 1;
  }
  backend_.synchronize();
  state_.step = step_number;
  state_.last_train_loss = progress.loss;

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double tokens =
      static_cast<double>(sampler_.global_windows_per_step() * spec_.model.seq_len);
  train_tokens_ += tokens;
  train_seconds_ += seconds;
  train_steps_ += 1;
  if (options_.comm) {
    const CommOpStats sent = options_.comm->stats().since(comm_before).total();
    comm_elements_ += sent.elements_sent;
    comm_bytes_ += sent.bytes_sent;
  }
  progress.seconds = seconds;
  progress.tokens = tokens;
  progress.tokens_per_second = seconds > 0.0 ? tokens / seconds : 0.0;
  return progress;
}

float Trainer::forward(ModelWeights& weights, const TokenBatch& batch) {
  // Written by the host directly (host-readable memory, pinned on a GPU):
  // the last upload from them is done, since forward() waited for its
  // losses; the model then uploads them asynchronously.
  std::memcpy(tokens_.data(), batch.inputs.data(), tokens_.nbytes());
  std::memcpy(targets_.data(), batch.targets.data(), targets_.nbytes());
  return model_->forward(weights, tokens_, targets_);
}

double Trainer::mean_over_ranks(double local) {
  if (zero_.world_size() == 1) return local;
  const float sum = zero_.all_reduce_scalar(static_cast<float>(local), ReduceOp::kSum);
  return static_cast<double>(sum) / zero_.world_size();
}

Trainer::GradClip Trainer::clip(float loss_scale) {
  GradClip out;
  out.norm = zero_.gradient_norm(loss_scale);
  out.coefficient = clip_coefficient(out.norm, spec_.train.grad_clip);
  return out;
}

}  // namespace mixtrain
