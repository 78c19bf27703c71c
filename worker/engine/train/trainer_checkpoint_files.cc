// Why: reading the trainer's checkpoint layout (see trainer_checkpoint_files.h).
#include "train/trainer_checkpoint_files.h"

#include <optional>
#include <string>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/manifest.h"
#include "common/error.h"

namespace mixtrain {

std::filesystem::path resolve_checkpoint(const std::filesystem::path& path) {
  if (std::filesystem::exists(path / kManifestFileName)) return path;
  const std::optional<CheckpointInfo> latest = latest_checkpoint(path);
  MIXTRAIN_CHECK_ARG(latest.has_value(), "no complete checkpoint in " + path.string() +
                                             " (expected a step_NNNNNNNN directory with " +
                                             std::string(kManifestFileName) + ", or one itself)");
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
  const std::filesystem::path resolved = resolve_checkpoint(path);
  LoadedCheckpoint checkpoint = load_checkpoint(resolved);
  TrainerState state = trainer_state_from_json(checkpoint.state, resolved.string());
  const int64_t total = ParameterLayout(state.model).param_count();
  return TrainerCheckpoint{resolved, std::move(state),
                           ShardedVector(resolved, std::move(checkpoint.files), total)};
}

CheckpointWeights load_checkpoint_weights(const std::filesystem::path& path) {
  TrainerCheckpoint checkpoint = open_trainer_checkpoint(path);
  const FlatRun everything{0, checkpoint.shards.total()};
  std::vector<float> master = checkpoint.shards.read(kMasterTensorName, {&everything, 1});
  return CheckpointWeights{std::move(checkpoint.path), std::move(checkpoint.state),
                           std::move(master)};
}

}  // namespace mixtrain
