// Why: reading the trainer's checkpoint layout (see trainer_checkpoint_files.h).
#include "engine/train/trainer_checkpoint_files.h"

#include <cstring>
#include <optional>
#include <string>

#include "engine/checkpoint/checkpoint_store.h"
#include "engine/checkpoint/manifest.h"
#include "engine/common/error.h"

namespace mixtrain {

namespace {

// "no complete checkpoint in PATH (...)": `path` holds no checkpoint at all.
std::string no_checkpoint_in(const std::filesystem::path& path) {
  return "no complete checkpoint in " + path.string() +
         " (expected a step_NNNNNNNN directory with " + std::string(kManifestFileName) +
         ", or one itself)";
}

bool holds_manifest(const std::filesystem::path& path) {
  return std::filesystem::exists(path / kManifestFileName);
}

// Opens the checkpoint directory `checkpoint` (see open_trainer_checkpoint).
TrainerCheckpoint open_checkpoint_directory(const std::filesystem::path& checkpoint) {
  LoadedCheckpoint loaded = load_checkpoint(checkpoint);
  TrainerState state = trainer_state_from_json(loaded.state, checkpoint.string());
  const int64_t total = ParameterLayout(state.model).param_count();
  std::optional<std::vector<float>> fp8_recipe;
  if (loaded.files.contains(kFp8RecipeFileName)) {
    const SafetensorsFile& file = loaded.file(kFp8RecipeFileName);
    const SafetensorsEntry* entry = file.find(kFp8RecipeTensorName);
    MIXTRAIN_CHECK_ARG(
        entry != nullptr && entry->layout.dtype == DType::kF32 && entry->layout.shape.size() == 1,
        file.path().string() + ": expected the fp32 vector \"" + kFp8RecipeTensorName + "\"");
    const std::span<const std::byte> bytes = file.bytes(*entry);
    fp8_recipe.emplace(bytes.size() / sizeof(float));
    std::memcpy(fp8_recipe->data(), bytes.data(), bytes.size());
  }
  return TrainerCheckpoint{checkpoint, std::move(state),
                           ShardedVector(checkpoint, std::move(loaded.files), total),
                           std::move(fp8_recipe)};
}

}  // namespace

std::filesystem::path resolve_checkpoint(const std::filesystem::path& path) {
  if (holds_manifest(path)) return path;
  const std::optional<CheckpointInfo> latest = latest_checkpoint(path);
  MIXTRAIN_CHECK_ARG(latest.has_value(), no_checkpoint_in(path));
  return latest->path;
}

std::vector<FlatRun> plain_runs(const ParameterLayout& padded, const ZeroPartition& partition) {
  std::vector<int64_t> plain_offset;  // of each parameter
  int64_t next = 0;
  for (const ParameterInfo& info : padded.parameters()) {
    plain_offset.push_back(next);
    next += info.numel;
  }
  std::vector<FlatRun> runs;
  for (const PartitionSegment& segment : partition.segments()) {
    const int64_t inside = segment.flat_offset - padded.parameters()[segment.parameter].offset;
    runs.push_back(FlatRun{plain_offset[segment.parameter] + inside, segment.numel});
  }
  return runs;
}

TrainerCheckpoint open_trainer_checkpoint(const std::filesystem::path& path) {
  return open_checkpoint_directory(resolve_checkpoint(path));
}

TrainerCheckpoint open_resume_checkpoint(const std::filesystem::path& path,
                                         const SkippedCheckpointFn& skipped) {
  if (holds_manifest(path)) return open_checkpoint_directory(path);
  const std::vector<CheckpointInfo> candidates = list_checkpoint_dirs(path);
  MIXTRAIN_CHECK_ARG(!candidates.empty(), no_checkpoint_in(path));
  std::string reasons;
  for (auto candidate = candidates.rbegin(); candidate != candidates.rend(); ++candidate) {
    try {
      return open_checkpoint_directory(candidate->path);
    } catch (const EngineError& refused) {
      if (refused.code() != ErrorCode::kInvalidArgument) throw;
      skipped(candidate->path, refused.what());
      reasons += std::string("; ") + refused.what();
    }
  }
  throw EngineError(ErrorCode::kInvalidArgument,
                    "no checkpoint in " + path.string() + " verifies" + reasons);
}

CheckpointWeights load_checkpoint_weights(const std::filesystem::path& path) {
  TrainerCheckpoint checkpoint = open_trainer_checkpoint(path);
  const FlatRun everything{0, checkpoint.shards.total()};
  std::vector<float> master = checkpoint.shards.read(kMasterTensorName, {&everything, 1});
  return CheckpointWeights{std::move(checkpoint.path), std::move(checkpoint.state),
                           std::move(master)};
}

}  // namespace mixtrain
