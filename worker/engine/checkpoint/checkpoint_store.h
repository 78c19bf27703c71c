// Why: training must resume from the last good checkpoint after any crash,
// so a checkpoint appears all at once or not at all, and is checked before
// use. A checkpoint is a directory DIR/step_00000500/ holding safetensors
// data files and manifest.json (written last; see manifest.h) with every
// file's size and CRC32C. It is built in DIR/step_00000500.tmp-<pid>/,
// whose files and directory are fsynced, then renamed into place and the
// parent fsynced. A directory without a valid manifest is never used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/safetensors.h"
#include "common/json.h"

namespace mixtrain {

// Data file name (see is_valid_data_file_name) -> its tensors, in order.
using CheckpointFiles = std::map<std::string, std::vector<HostTensor>>;

// A complete checkpoint found in a directory.
struct CheckpointInfo {
  int64_t step = 0;
  std::filesystem::path path;
};

// A checkpoint whose every file matched its manifest size and checksum.
struct LoadedCheckpoint {
  int64_t step = 0;
  Json state;
  std::map<std::string, SafetensorsFile, std::less<>> files;

  // The data file `name`; throws EngineError(kInvalidArgument) if the
  // checkpoint has none of that name.
  const SafetensorsFile& file(std::string_view name) const;
};

// "step_00000500" (at least 8 digits).
std::string checkpoint_dir_name(int64_t step);

// Writes checkpoint `step` into `dir` (created if missing) atomically and
// returns its path. `state` must be a JSON object; file names must satisfy
// is_valid_data_file_name. Throws EngineError(kInvalidArgument) for bad
// arguments or if the step already exists, EngineError(kInternal) for I/O
// errors; on any failure the temporary directory is removed and no
// checkpoint appears.
std::filesystem::path save_checkpoint(const std::filesystem::path& dir, int64_t step,
                                      const CheckpointFiles& files, const Json& state);

// The complete checkpoints in `dir`, oldest step first: directories named
// checkpoint_dir_name(step) whose manifest is valid, names that step, and
// lists files that exist with their recorded sizes (checksums are checked
// by load_checkpoint). Anything else is ignored. Empty if `dir` is absent.
std::vector<CheckpointInfo> list_checkpoints(const std::filesystem::path& dir);

// The newest complete checkpoint in `dir`, if any.
std::optional<CheckpointInfo> latest_checkpoint(const std::filesystem::path& dir);

// Loads the checkpoint directory `path`: reads its manifest and verifies
// every listed file's size and CRC32C, then its safetensors structure,
// before returning anything. Throws EngineError(kInvalidArgument) naming
// the checkpoint and the file for a missing, truncated, corrupt or
// malformed file or manifest.
LoadedCheckpoint load_checkpoint(const std::filesystem::path& path);

// Keeps the newest `keep` (>= 1) complete checkpoints in `dir`: older
// complete ones are removed (first renamed to a temporary name, so a crash
// mid-removal leaves only a stale temporary), as are temporary directories
// whose creating process no longer runs on this machine. Directories
// without a valid manifest are left alone. Returns the paths removed.
// Throws EngineError(kInvalidArgument) for keep == 0, kInternal on I/O error.
std::vector<std::filesystem::path> retain_checkpoints(const std::filesystem::path& dir,
                                                      size_t keep);

}  // namespace mixtrain
