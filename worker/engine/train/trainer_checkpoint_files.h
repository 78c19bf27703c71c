// Why: the trainer's checkpoint layout (one "trainer.safetensors" holding
// flat fp32 "master", "adam_m", "adam_v" in ParameterLayout order, plus the
// trainer state JSON) is read in two places: resuming a run and using its
// weights (`mixtrain sample`). Both go through these functions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "checkpoint/safetensors.h"
#include "train/trainer_state.h"

namespace mixtrain {

inline constexpr const char* kTrainerDataFileName = "trainer.safetensors";
inline constexpr const char* kMasterTensorName = "master";
inline constexpr const char* kAdamMTensorName = "adam_m";
inline constexpr const char* kAdamVTensorName = "adam_v";

// The checkpoint directory `path` names: itself when it holds a manifest,
// else the newest complete checkpoint inside it (a run's checkpoint
// directory). Throws EngineError(kInvalidArgument) naming `path` when it
// is neither.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& path);

// The flat fp32 tensor `name` of `file`, checked to hold `numel` elements.
// Throws EngineError(kInvalidArgument) naming the file and tensor otherwise.
std::vector<float> read_flat_fp32(const SafetensorsFile& file, const char* name, int64_t numel);

// A trained model as a checkpoint holds it: its shape and fp32 weights.
struct CheckpointWeights {
  std::filesystem::path path;  // the resolved checkpoint directory
  TrainerState state;
  std::vector<float> master;   // ParameterLayout(state.model) order
};

// Loads (checksums verified) the checkpoint `path` names (see
// resolve_checkpoint) and returns its model shape and master weights.
CheckpointWeights load_checkpoint_weights(const std::filesystem::path& path);

}  // namespace mixtrain
