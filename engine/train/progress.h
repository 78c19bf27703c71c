// Why: the engine never prints; a CLI, a worker agent or a test decides
// what to do with progress. The trainer reports each step, each
// evaluation and each notable event (an overflow line) through these
// callbacks, which any of them may leave empty.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "engine/amp/fp8_recipe.h"
#include "engine/train/gradient_range.h"

namespace mixtrain {

// One finished training step (applied or skipped).
struct StepProgress {
  int64_t step = 0;                // steps done so far, 1-based: the first step reports 1
  int64_t steps = 0;               // train.steps
  double loss = 0.0;               // mean training loss over the step's micro-batches
  double loss_scale = 1.0;         // the loss scale after this step's update (next step's scale)
  double lr = 0.0;                 // learning rate of this step
  double grad_norm = 0.0;          // global L2 norm of the unscaled gradients; 0 when skipped
  double tokens_per_second = 0.0;  // training tokens of this step / its wall time
  bool skipped = false;            // inf/NaN gradients: no update applied
  // When skipped: "nan" or "inf" (the first non-finite value found), and
  // where it showed first: "loss" (the loss itself was not finite) or
  // "grads" (a finite loss, non-finite gradients). Empty otherwise.
  std::string nonfinite_kind;
  std::string nonfinite_where;
  double seconds = 0.0;  // wall time of this step
  double tokens = 0.0;   // training tokens of this step over all ranks
  // Every precision.stats_every steps: this rank's gradient range.
  std::optional<GradientRange> gradient_range;
  // Compute fp8: the recipe's figures by tensor kind (Fp8TensorKind order).
  std::optional<std::array<Fp8KindStats, kFp8TensorKinds>> fp8;
};

// One evaluation, after `step` steps.
struct EvalProgress {
  int64_t step = 0;
  double val_loss = 0.0;  // mean loss over train.eval_batches validation batches
};

// An evaluation under way after `step` steps: `done` of `batches`
// validation batches evaluated. A long evaluation is progress too (a
// watchdog must not take it for a hung rank).
struct EvalBatchProgress {
  int64_t step = 0;
  int64_t done = 0;
  int64_t batches = 0;
};

// Callbacks the trainer calls on its own thread; any may be empty.
struct TrainerProgress {
  std::function<void(const StepProgress&)> on_step;
  std::function<void(const EvalProgress&)> on_eval;
  std::function<void(const EvalBatchProgress&)> on_eval_batch;  // after each batch
  std::function<void(const std::string&)> on_log;  // one line, no trailing newline
};

}  // namespace mixtrain
