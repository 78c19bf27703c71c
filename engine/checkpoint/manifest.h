// Why: a checkpoint is complete exactly when its manifest.json exists and
// is valid, so the manifest is the one place that says which files belong
// to a checkpoint, how long each is and its CRC32C, plus the step and the
// trainer's free-form state. Its JSON form (version 1):
//   {"format": "mixtrain-checkpoint", "version": 1, "step": 500,
//    "checksum": "crc32c",
//    "files": [{"name": "model.safetensors", "bytes": 1234,
//               "crc32c": "e3069283"}, ...],
//    "state": {...}}
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/json.h"

namespace mixtrain {

inline constexpr std::string_view kManifestFileName = "manifest.json";

struct ManifestFile {
  std::string name;  // a data file in the checkpoint directory
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};

struct CheckpointManifest {
  int64_t step = 0;
  std::vector<ManifestFile> files;
  Json state = Json::object();
};

// True for names a checkpoint data file may have: letters, digits, '.',
// '_' and '-', not starting with '.', ending in ".safetensors".
bool is_valid_data_file_name(std::string_view name);

// The manifest's JSON text.
std::string manifest_to_json(const CheckpointManifest& manifest);

// Parses and validates manifest JSON: format tag, version 1, a
// non-negative step, unique valid file names with non-negative sizes and
// 8-hex-digit checksums, an object state. Throws EngineError
// (kInvalidArgument) describing the first problem.
CheckpointManifest parse_manifest(std::string_view text);

}  // namespace mixtrain
