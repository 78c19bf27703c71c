// Why: the trainer's checkpoint layout is read in three places (resuming a
// run at any world size and ZeRO stage, `mixtrain sample` and `mixtrain
// export`) and written by every rank that owns optimizer state; these
// functions are its one definition. A checkpoint holds the trainer state
// JSON (in the manifest) and the fp32 optimizer state as a ShardedVector
// (checkpoint/sharded_vector.h) of ParameterLayout(model) order, the plain
// unpadded layout: shard files "shard-RRRRR-of-NNNNN.safetensors", one per
// rank that owns state (stage 0: rank 0 alone, as shard 0 of 1), each with
// the tensors "master", "adam_m" and "adam_v" holding that rank's segments
// and the metadata "segments" and "mixtrain_config" (as in HF exports).
// A compute fp8 run adds "fp8_recipe.safetensors" with the fp32 tensor
// "fp8_recipe" (Fp8Recipe::state(), the same on every rank).
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/checkpoint/sharded_vector.h"
#include "engine/model/parameter_layout.h"
#include "engine/train/trainer_state.h"
#include "engine/zero/zero_partition.h"

namespace mixtrain {

inline constexpr const char* kMasterTensorName = "master";
inline constexpr const char* kAdamMTensorName = "adam_m";
inline constexpr const char* kAdamVTensorName = "adam_v";
inline constexpr const char* kFp8RecipeFileName = "fp8_recipe.safetensors";
inline constexpr const char* kFp8RecipeTensorName = "fp8_recipe";

// The checkpoint directory `path` names: itself when it holds a manifest,
// else the newest complete checkpoint inside it (a run's checkpoint
// directory). Throws EngineError(kInvalidArgument) naming `path` when it
// is neither.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& path);

// Where the segments of `partition` (a partition of the padded layout
// `padded`) lie in the plain layout ParameterLayout(config): one run per
// segment, in segment order.
std::vector<FlatRun> plain_runs(const ParameterLayout& padded, const ZeroPartition& partition);

// A trainer checkpoint opened for reading.
struct TrainerCheckpoint {
  std::filesystem::path path;  // the resolved checkpoint directory
  TrainerState state;
  ShardedVector shards;  // of ParameterLayout(state.model).param_count() values
  std::optional<std::vector<float>> fp8_recipe;  // when the checkpoint has one
};

// Resolves `path` (see resolve_checkpoint), loads the checkpoint with every
// checksum verified, parses its state and indexes its shards. Throws
// EngineError(kInvalidArgument) naming the checkpoint and the file that is
// missing, corrupt or malformed.
TrainerCheckpoint open_trainer_checkpoint(const std::filesystem::path& path);

// Told of each checkpoint a resume passes over: its directory and why it
// does not verify.
using SkippedCheckpointFn =
    std::function<void(const std::filesystem::path& checkpoint, const std::string& reason)>;

// The checkpoint a run resumes from, opened as open_trainer_checkpoint does:
// `path` itself when it holds a manifest (refused if it does not verify),
// else the newest checkpoint directory in the run directory `path` that
// verifies, every file's checksum included; each newer one that does not
// is passed to `skipped`. Throws EngineError(kInvalidArgument) naming `path`
// when it holds no checkpoint directory, or none that verifies (with each
// one's reason).
TrainerCheckpoint open_resume_checkpoint(const std::filesystem::path& path,
                                         const SkippedCheckpointFn& skipped);

// A trained model as a checkpoint holds it: its shape and fp32 weights.
struct CheckpointWeights {
  std::filesystem::path path;  // the resolved checkpoint directory
  TrainerState state;
  std::vector<float> master;  // ParameterLayout(state.model) order
};

// Opens the checkpoint `path` names (see open_trainer_checkpoint) and
// assembles its master weights from the shards.
CheckpointWeights load_checkpoint_weights(const std::filesystem::path& path);

}  // namespace mixtrain
