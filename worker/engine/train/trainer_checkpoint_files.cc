// Why: reading the trainer's checkpoint layout (see trainer_checkpoint_files.h).
#include "train/trainer_checkpoint_files.h"

#include <cstring>
#include <optional>
#include <string>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/manifest.h"
#include "common/error.h"
#include "model/parameter_layout.h"

namespace mixtrain {

std::filesystem::path resolve_checkpoint(const std::filesystem::path& path) {
  if (std::filesystem::exists(path / kManifestFileName)) return path;
  const std::optional<CheckpointInfo> latest = latest_checkpoint(path);
  MIXTRAIN_CHECK_ARG(latest.has_value(), "no complete checkpoint in " + path.string() +
                                             " (expected a step_NNNNNNNN directory with " +
                                             std::string(kManifestFileName) + ", or one itself)");
  return latest->path;
}

std::vector<float> read_flat_fp32(const SafetensorsFile& file, const char* name, int64_t numel) {
  const SafetensorsEntry* entry = file.find(name);
  MIXTRAIN_CHECK_ARG(entry != nullptr,
                     file.path().string() + ": checkpoint lacks tensor \"" + name + "\"");
  MIXTRAIN_CHECK_ARG(entry->layout.dtype == DType::kF32 && entry->layout.shape == Shape{numel},
                     file.path().string() + ": tensor \"" + name + "\" is " +
                         dtype_name(entry->layout.dtype) + shape_string(entry->layout.shape) +
                         ", expected fp32" + shape_string(Shape{numel}));
  // The file's bytes may be unaligned: copy them to aligned memory.
  const std::span<const std::byte> bytes = file.bytes(*entry);
  std::vector<float> values(static_cast<size_t>(numel));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

CheckpointWeights load_checkpoint_weights(const std::filesystem::path& path) {
  CheckpointWeights weights;
  weights.path = resolve_checkpoint(path);
  const LoadedCheckpoint checkpoint = load_checkpoint(weights.path);
  weights.state = trainer_state_from_json(checkpoint.state, weights.path.string());
  const ParameterLayout layout(weights.state.model);
  weights.master =
      read_flat_fp32(checkpoint.file(kTrainerDataFileName), kMasterTensorName, layout.numel());
  return weights;
}

}  // namespace mixtrain
