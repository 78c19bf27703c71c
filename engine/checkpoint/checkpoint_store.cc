// Why: the filesystem protocol behind checkpoint_store.h: build in a
// temporary directory (from one or several writers), fsync, write the
// manifest, rename, fsync the parent; list only what has a valid manifest;
// verify checksums before handing out any tensor.
#include "engine/checkpoint/checkpoint_store.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <set>
#include <system_error>

#include "engine/checkpoint/crc32c.h"
#include "engine/checkpoint/file_io.h"
#include "engine/common/error.h"

namespace mixtrain {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kStepPrefix = "step_";
constexpr std::string_view kTemporaryInfix = ".tmp-epoch-";
constexpr std::string_view kDamagedInfix = ".damaged-";

[[noreturn]] void throw_io_error(const std::string& what, const fs::path& path,
                                 const std::error_code& error) {
  throw EngineError(ErrorCode::kInternal, what + " " + path.string() + ": " + error.message());
}

// Digits only, as a non-negative int64; nullopt otherwise.
std::optional<int64_t> parse_decimal(std::string_view digits) {
  int64_t value = 0;
  if (digits.empty() || digits.front() == '-' || digits.front() == '+') return std::nullopt;
  const auto result = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (result.ec != std::errc() || result.ptr != digits.data() + digits.size()) return std::nullopt;
  return value;
}

// The step of a directory named exactly checkpoint_dir_name(step).
std::optional<int64_t> parse_step_dir_name(std::string_view name) {
  if (!name.starts_with(kStepPrefix)) return std::nullopt;
  const std::optional<int64_t> step = parse_decimal(name.substr(kStepPrefix.size()));
  if (!step || checkpoint_dir_name(*step) != name) return std::nullopt;
  return step;
}

// The epoch of a directory named checkpoint_temporary_dir(dir, step, epoch).
std::optional<int64_t> parse_temporary_dir_name(std::string_view name) {
  const size_t infix = name.find(kTemporaryInfix);
  if (infix == std::string_view::npos || !parse_step_dir_name(name.substr(0, infix))) {
    return std::nullopt;
  }
  return parse_decimal(name.substr(infix + kTemporaryInfix.size()));
}

void rename_or_throw(const fs::path& from, const fs::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    throw_io_error("cannot rename " + from.string() + " to", to,
                   std::error_code(errno, std::generic_category()));
  }
}

void remove_all_or_throw(const fs::path& path) {
  std::error_code error;
  fs::remove_all(path, error);
  if (error) throw_io_error("cannot remove", path, error);
}

CheckpointManifest read_manifest(const fs::path& checkpoint) {
  const MappedFile file(checkpoint / kManifestFileName);
  const std::span<const std::byte> bytes = file.bytes();
  return parse_manifest({reinterpret_cast<const char*>(bytes.data()), bytes.size()});
}

// The first file the manifest lists that is missing or not of its recorded
// size; nullptr if there is none.
const ManifestFile* mismatched_file(const fs::path& checkpoint,
                                    const CheckpointManifest& manifest) {
  for (const ManifestFile& file : manifest.files) {
    std::error_code error;
    const uintmax_t size = fs::file_size(checkpoint / file.name, error);
    if (error || size != file.bytes) return &file;
  }
  return nullptr;
}

std::string crc_hex(uint32_t crc) {
  char text[11];
  std::snprintf(text, sizeof(text), "0x%08x", crc);
  return text;
}

}  // namespace

const SafetensorsFile& LoadedCheckpoint::file(std::string_view name) const {
  const auto it = files.find(name);
  MIXTRAIN_CHECK_ARG(it != files.end(), "checkpoint step " + std::to_string(step) +
                                            " has no data file \"" + std::string(name) + "\"");
  return it->second;
}

std::string checkpoint_dir_name(int64_t step) {
  char text[32];
  std::snprintf(text, sizeof(text), "step_%08lld", static_cast<long long>(step));
  return text;
}

fs::path save_checkpoint(const fs::path& dir, int64_t step, const CheckpointFiles& files,
                         const Json& state) {
  const fs::path temporary = begin_checkpoint(dir, step, /*epoch=*/0);
  try {
    std::vector<ManifestFile> written;
    for (const auto& [name, tensors] : files)
      written.push_back(write_checkpoint_file(temporary, name, tensors));
    return commit_checkpoint(temporary, step, written, state);
  } catch (...) {
    abort_checkpoint(temporary);
    throw;
  }
}

fs::path checkpoint_temporary_dir(const fs::path& dir, int64_t step, int64_t epoch) {
  return dir / (checkpoint_dir_name(step) + std::string(kTemporaryInfix) + std::to_string(epoch));
}

fs::path begin_checkpoint(const fs::path& dir, int64_t step, int64_t epoch) {
  MIXTRAIN_CHECK_ARG(step >= 0 && epoch >= 0, "begin_checkpoint: negative step " +
                                                  std::to_string(step) + " or epoch " +
                                                  std::to_string(epoch));
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw_io_error("cannot create checkpoint directory", dir, error);
  set_aside_damaged_checkpoint(dir, step);
  const fs::path final_path = dir / checkpoint_dir_name(step);
  MIXTRAIN_CHECK_ARG(!fs::exists(final_path, error),
                     "begin_checkpoint: " + final_path.string() + " already exists");
  const fs::path temporary = checkpoint_temporary_dir(dir, step, epoch);
  remove_all_or_throw(temporary);  // left by an earlier failed save of this epoch
  if (!fs::create_directory(temporary, error) || error) {
    throw_io_error("cannot create", temporary, error);
  }
  return temporary;
}

ManifestFile write_checkpoint_file(const fs::path& temporary, const std::string& name,
                                   std::span<const HostTensor> tensors,
                                   const SafetensorsMetadata& metadata) {
  MIXTRAIN_CHECK_ARG(is_valid_data_file_name(name),
                     "checkpoint: invalid data file name \"" + name +
                         "\" (letters, digits, '.', '_', '-', ending in .safetensors)");
  const WrittenFile written = write_safetensors(temporary / name, tensors, metadata);
  return ManifestFile{name, written.bytes, written.crc32c};
}

fs::path commit_checkpoint(const fs::path& temporary, int64_t step,
                           const std::vector<ManifestFile>& files, const Json& state) {
  const std::string where = "commit_checkpoint " + temporary.string() + ": ";
  MIXTRAIN_CHECK_ARG(state.is_object(),
                     where + "state must be a JSON object, not " + state.type_name());
  MIXTRAIN_CHECK_ARG(temporary.filename().string().starts_with(checkpoint_dir_name(step) +
                                                               std::string(kTemporaryInfix)),
                     where + "not the temporary directory of step " + std::to_string(step));
  std::set<std::string_view> names;
  for (const ManifestFile& file : files) {
    MIXTRAIN_CHECK_ARG(names.insert(file.name).second,
                       where + "file " + file.name + " is listed twice");
  }
  const CheckpointManifest manifest{.step = step, .files = files, .state = state};
  const ManifestFile* mismatched = mismatched_file(temporary, manifest);
  MIXTRAIN_CHECK_ARG(mismatched == nullptr, where + "file " + mismatched->name +
                                                " is missing or not of its recorded size");
  const std::string text = manifest_to_json(manifest);
  FileWriter out(temporary / kManifestFileName);
  out.write(std::as_bytes(std::span(text)));
  out.sync_and_close();
  fsync_directory(temporary);
  const fs::path dir = temporary.parent_path();
  const fs::path final_path = dir / checkpoint_dir_name(step);
  rename_or_throw(temporary, final_path);
  fsync_directory(dir);
  return final_path;
}

void abort_checkpoint(const fs::path& temporary) noexcept {
  std::error_code ignored;
  fs::remove_all(temporary, ignored);
}

std::vector<CheckpointInfo> list_checkpoint_dirs(const fs::path& dir) {
  std::vector<CheckpointInfo> found;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::optional<int64_t> step = parse_step_dir_name(it->path().filename().string());
    std::error_code type_error;  // its own, so a failed stat cannot end the iteration
    if (step && it->is_directory(type_error)) found.push_back(CheckpointInfo{*step, it->path()});
  }
  std::sort(found.begin(), found.end(),
            [](const CheckpointInfo& a, const CheckpointInfo& b) { return a.step < b.step; });
  return found;
}

std::vector<CheckpointInfo> list_checkpoints(const fs::path& dir) {
  std::vector<CheckpointInfo> complete;
  for (const CheckpointInfo& candidate : list_checkpoint_dirs(dir)) {
    try {
      const CheckpointManifest manifest = read_manifest(candidate.path);
      if (manifest.step == candidate.step && mismatched_file(candidate.path, manifest) == nullptr) {
        complete.push_back(candidate);
      }
    } catch (const EngineError&) {
      // No readable, valid manifest: not a complete checkpoint.
    }
  }
  return complete;
}

std::optional<CheckpointInfo> latest_checkpoint(const fs::path& dir) {
  std::vector<CheckpointInfo> all = list_checkpoints(dir);
  if (all.empty()) return std::nullopt;
  return all.back();
}

LoadedCheckpoint load_checkpoint(const fs::path& path) {
  const std::string where = "checkpoint " + path.string();
  CheckpointManifest manifest;
  try {
    manifest = read_manifest(path);
  } catch (const EngineError& error) {
    throw EngineError(ErrorCode::kInvalidArgument,
                      where + ": " + kManifestFileName.data() + ": " + error.what());
  }
  LoadedCheckpoint loaded;
  loaded.step = manifest.step;
  loaded.state = std::move(manifest.state);
  for (const ManifestFile& expected : manifest.files) {
    MappedFile file(path / expected.name);
    const std::span<const std::byte> bytes = file.bytes();
    MIXTRAIN_CHECK_ARG(bytes.size() == expected.bytes,
                       where + ": file " + expected.name + " has " + std::to_string(bytes.size()) +
                           " bytes, the manifest records " + std::to_string(expected.bytes) +
                           " (truncated or replaced)");
    const uint32_t actual_crc = crc32c(bytes);
    MIXTRAIN_CHECK_ARG(actual_crc == expected.crc32c,
                       where + ": file " + expected.name + " has CRC32C " + crc_hex(actual_crc) +
                           ", the manifest records " + crc_hex(expected.crc32c) + " (corrupt)");
    loaded.files.emplace(expected.name, SafetensorsFile(std::move(file)));
  }
  return loaded;
}

std::optional<std::string> checkpoint_damage(const fs::path& path) {
  try {
    load_checkpoint(path);
    return std::nullopt;
  } catch (const EngineError& refused) {
    if (refused.code() != ErrorCode::kInvalidArgument) throw;
    return refused.what();
  }
}

std::optional<SetAsideCheckpoint> set_aside_damaged_checkpoint(const fs::path& dir, int64_t step) {
  const fs::path path = dir / checkpoint_dir_name(step);
  std::error_code error;
  if (!fs::exists(fs::symlink_status(path, error))) return std::nullopt;
  const std::optional<std::string> reason = checkpoint_damage(path);
  if (!reason) return std::nullopt;
  const auto damaged_name = [&](int k) {
    return dir / (checkpoint_dir_name(step) + std::string(kDamagedInfix) + std::to_string(k));
  };
  int k = 1;
  fs::path aside = damaged_name(k);
  while (fs::exists(fs::symlink_status(aside, error))) aside = damaged_name(++k);
  rename_or_throw(path, aside);
  fsync_directory(dir);
  return SetAsideCheckpoint{aside, *reason};
}

bool remove_checkpoint(const fs::path& dir, int64_t step, int64_t epoch) {
  const fs::path path = dir / checkpoint_dir_name(step);
  std::error_code error;
  if (!fs::exists(path, error)) return false;
  const fs::path doomed = checkpoint_temporary_dir(dir, step, epoch);
  remove_all_or_throw(doomed);
  rename_or_throw(path, doomed);
  remove_all_or_throw(doomed);
  return true;
}

std::vector<fs::path> retain_checkpoints(const fs::path& dir, size_t keep, int64_t epoch) {
  MIXTRAIN_CHECK_ARG(keep >= 1, "retain_checkpoints: keep must be at least 1");
  std::vector<fs::path> removed;
  const std::vector<CheckpointInfo> complete = list_checkpoints(dir);
  for (size_t i = 0; i + keep < complete.size(); ++i) {
    if (remove_checkpoint(dir, complete[i].step, epoch)) removed.push_back(complete[i].path);
  }
  return removed;
}

std::vector<fs::path> remove_stale_checkpoint_temporaries(const fs::path& dir, int64_t epoch) {
  std::vector<fs::path> stale;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::optional<int64_t> built_by =
        parse_temporary_dir_name(it->path().filename().string());
    if (built_by && *built_by < epoch) stale.push_back(it->path());
  }
  for (const fs::path& path : stale) {
    // Another rank may be removing it at the same time, which can fail
    // this walk midway: done is when it is gone, by whoever's hand.
    for (int tries = 1;; ++tries) {
      std::error_code failure;
      fs::remove_all(path, failure);
      std::error_code ignored;
      if (!fs::exists(fs::symlink_status(path, ignored))) break;
      if (tries == 3) throw_io_error("cannot remove the stale temporary", path, failure);
    }
  }
  return stale;
}

}  // namespace mixtrain
