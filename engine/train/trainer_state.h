// Why: a checkpoint must carry every counter that decides what the next
// step does (step, optimizer step, loss scaler, sampler position) so that a
// resumed run continues bit for bit, plus the model shape and compute dtype
// it was written for, so that resuming into an incompatible job spec is
// refused up front instead of failing deep inside a tensor copy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/amp/loss_scaler.h"
#include "engine/common/json.h"
#include "engine/data/batch_sampler.h"
#include "engine/model/gpt_config.h"
#include "engine/numerics/dtype.h"

namespace mixtrain {

// Everything but the tensors that a checkpoint stores for a trainer.
struct TrainerState {
  int64_t step = 0;             // steps done (applied and skipped)
  int64_t optimizer_steps = 0;  // steps applied: AdamW's bias-correction count
  LossScalerState scaler;
  SamplerState sampler;
  int64_t nan_events = 0;
  int64_t inf_events = 0;
  std::optional<double> last_train_loss;
  std::optional<double> last_val_loss;
  GptConfig model;
  DType compute_dtype = DType::kF32;
};

// The state as a JSON object (format "mixtrain-trainer-state", version 1).
Json trainer_state_to_json(const TrainerState& state);

// Parses trainer_state_to_json's output. Throws EngineError
// (kInvalidArgument) naming `source` and the missing or mistyped field.
TrainerState trainer_state_from_json(const Json& json, const std::string& source);

// Throws EngineError(kInvalidArgument) naming `source`, the job-spec key
// and both values unless `state` was written for a model of `model`'s shape
// computing in `compute_dtype`.
void check_resumable(const TrainerState& state, const GptConfig& model, DType compute_dtype,
                     const std::string& source);

}  // namespace mixtrain
