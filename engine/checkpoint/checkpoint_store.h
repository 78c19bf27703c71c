// Why: training must resume from the last good checkpoint after any crash,
// so a checkpoint appears all at once or not at all, and is checked before
// use. A checkpoint is a directory DIR/step_00000500/ holding safetensors
// data files and manifest.json (written last; see manifest.h) with every
// file's size and CRC32C. It is built in DIR/step_00000500.tmp-epoch-<E>/
// (E: the attempt that builds it, checkpoint_fence.h; 0 for a run without
// fencing), whose files and directory are fsynced,
// then renamed into place and the parent fsynced. A directory without a
// valid manifest is never used; one whose files do not verify is moved
// aside (DIR/step_00000500.damaged-<k>, kept for inspection) before its
// step is written again. The data files may come from several
// processes (the ranks of a job, each writing its own shard): the builder
// API below is the one way checkpoints are written, save_checkpoint is it
// used by one process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/checkpoint/manifest.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/common/json.h"

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
// returns its path: begin_checkpoint (epoch 0), write_checkpoint_file for each file,
// commit_checkpoint. `state` must be a JSON object; file names must satisfy
// is_valid_data_file_name. Throws EngineError(kInvalidArgument) for bad
// arguments or if the step already exists, EngineError(kInternal) for I/O
// errors; on any failure the temporary directory is removed and no
// checkpoint appears.
std::filesystem::path save_checkpoint(const std::filesystem::path& dir, int64_t step,
                                      const CheckpointFiles& files, const Json& state);

// ---- building one checkpoint from one or several processes ---------------
// One process of an attempt, the owner, calls begin_checkpoint; every
// writer (the owner too, or not) calls write_checkpoint_file in the
// temporary directory that checkpoint_temporary_dir names for the
// attempt's epoch; once every file is written the owner calls
// commit_checkpoint with all their manifest entries, or abort_checkpoint.
// A crash before the commit leaves only the temporary directory:
// list_checkpoints ignores it, and remove_stale_checkpoint_temporaries
// removes it once its attempt has ended (named by epoch, not by process
// id, which means nothing on another host or in another pid namespace).

// DIR/step_00000500.tmp-epoch-<epoch>: where the attempt of `epoch` builds
// checkpoint `step` of `dir`.
std::filesystem::path checkpoint_temporary_dir(const std::filesystem::path& dir, int64_t step,
                                               int64_t epoch);

// Creates `dir` if missing and the empty temporary directory in which the
// attempt of `epoch` (>= 0) builds checkpoint `step` (replacing one an
// earlier failed save of it left), and returns its path. A directory of
// that step that does not verify is first set aside
// (set_aside_damaged_checkpoint). Throws EngineError(kInvalidArgument) for
// a negative step or epoch or a step that already exists and verifies,
// kInternal for I/O errors.
std::filesystem::path begin_checkpoint(const std::filesystem::path& dir, int64_t step,
                                       int64_t epoch);

// Writes the data file `name` (see is_valid_data_file_name) into the
// temporary directory `temporary` with `tensors` (in this order) and
// `metadata`, fsyncs it and returns its manifest entry. Throws
// EngineError(kInvalidArgument) for an invalid name or tensor, kInternal for
// I/O errors; a partial file may remain (abort_checkpoint removes it).
ManifestFile write_checkpoint_file(const std::filesystem::path& temporary, const std::string& name,
                                   std::span<const HostTensor> tensors,
                                   const SafetensorsMetadata& metadata = {});

// Completes checkpoint `step` built in `temporary` (begin_checkpoint's
// directory for that step): checks that each of `files` is there with its
// recorded size, writes the manifest listing them (in this order) with
// `state`, fsyncs it and the directory, renames the directory to
// DIR/checkpoint_dir_name(step) and fsyncs DIR. Returns the final path.
// Throws EngineError(kInvalidArgument) for a state that is not a JSON
// object, a directory of another step, or a file listed twice, missing or
// of another size; kInternal for I/O errors. The temporary directory is
// left as it is on failure (see abort_checkpoint).
std::filesystem::path commit_checkpoint(const std::filesystem::path& temporary, int64_t step,
                                        const std::vector<ManifestFile>& files, const Json& state);

// Removes the temporary directory `temporary` and its files, best effort,
// after a failed write or commit. Never throws.
void abort_checkpoint(const std::filesystem::path& temporary) noexcept;

// Every directory in `dir` named checkpoint_dir_name(step), complete or
// not, oldest step first: what a resume may try, newest first. Anything
// else (temporary and set-aside names) is ignored. Empty if `dir` is absent.
std::vector<CheckpointInfo> list_checkpoint_dirs(const std::filesystem::path& dir);

// The complete checkpoints in `dir`, oldest step first: those of
// list_checkpoint_dirs whose manifest is valid, names that step, and lists
// files that exist with their recorded sizes (checksums are checked by
// load_checkpoint). Empty if `dir` is absent.
std::vector<CheckpointInfo> list_checkpoints(const std::filesystem::path& dir);

// The newest complete checkpoint in `dir`, if any.
std::optional<CheckpointInfo> latest_checkpoint(const std::filesystem::path& dir);

// Loads the checkpoint directory `path`: reads its manifest and verifies
// every listed file's size and CRC32C, then its safetensors structure,
// before returning anything. Throws EngineError(kInvalidArgument) naming
// the checkpoint and the file for a missing, truncated, corrupt or
// malformed file or manifest.
LoadedCheckpoint load_checkpoint(const std::filesystem::path& path);

// Why load_checkpoint refuses the checkpoint directory `path` (a missing,
// truncated or corrupt file, a bad manifest): its message; nullopt when
// `path` verifies. Other errors (kInternal) propagate.
std::optional<std::string> checkpoint_damage(const std::filesystem::path& path);

// A checkpoint directory that did not verify, moved aside.
struct SetAsideCheckpoint {
  std::filesystem::path path;  // where it lies now: DIR/step_00000500.damaged-<k>
  std::string reason;          // why load_checkpoint refused it
};

// If DIR/checkpoint_dir_name(step) is there but load_checkpoint refuses it
// (a missing, truncated or corrupt file, a bad manifest), renames it to
// DIR/step_00000500.damaged-<k>, k the first of 1, 2, ... not taken, and
// returns where and why. Such names are never listed, pruned or reused:
// they stay for inspection. nullopt when the step is absent or verifies.
// Throws EngineError(kInternal) on I/O error.
std::optional<SetAsideCheckpoint> set_aside_damaged_checkpoint(const std::filesystem::path& dir,
                                                               int64_t step);

// Removes checkpoint `step` of `dir` if it is there, for the attempt of
// `epoch`: renamed to its temporary name first, so a crash mid-removal
// leaves only a stale temporary. Returns whether it was there. Throws
// kInternal on I/O error.
bool remove_checkpoint(const std::filesystem::path& dir, int64_t step, int64_t epoch);

// Keeps the newest `keep` (>= 1) complete checkpoints in `dir`: older
// complete ones are removed (remove_checkpoint for `epoch`). Directories
// without a valid manifest are left alone. Returns the paths removed.
// Throws EngineError(kInvalidArgument) for keep == 0, kInternal on I/O error.
std::vector<std::filesystem::path> retain_checkpoints(const std::filesystem::path& dir, size_t keep,
                                                      int64_t epoch);

// Removes every temporary directory in `dir` of an epoch before `epoch`:
// what attempts that have ended left (call it once an attempt has claimed
// `epoch`, or with epoch + 1 once the attempt of `epoch` has ended). Those
// of `epoch` and later are never touched. Several processes may do this at
// once (ranks on several hosts sharing `dir`). Returns the stale paths,
// all gone now; nothing when `dir` is absent. Throws EngineError(kInternal) naming
// a directory that could not be removed.
std::vector<std::filesystem::path> remove_stale_checkpoint_temporaries(
    const std::filesystem::path& dir, int64_t epoch);

}  // namespace mixtrain
