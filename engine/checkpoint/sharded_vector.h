// Why: each ZeRO rank saves only the optimizer state it owns, and a
// checkpoint must still load at any other world size and stage, or whole
// (export, sampling). So the state is stored as one flat fp32 vector (the
// model's values in their plain, unpadded order) cut into shards: data
// files "shard-00001-of-00004.safetensors", one per writer, each holding
// some runs of the vector, packed in run order, in flat fp32 tensors of the
// same length (one per kind of value: "master", "adam_m", "adam_v"), with
// the metadata "segments": "[[offset, numel], ...]" naming those runs in
// that order (adjacent runs merged). Together the shards hold every element
// exactly once. A reader asks for any runs and gets them copied out of
// whichever shards hold them, shard by shard, straight from the files'
// verified read-only mappings: no shard is ever copied whole.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/checkpoint/safetensors.h"

namespace mixtrain {

inline constexpr const char* kShardSegmentsMetadataKey = "segments";

// A run of consecutive elements of the whole vector.
struct FlatRun {
  int64_t offset = 0;  // its first element
  int64_t numel = 0;
};

// "shard-00003-of-00004.safetensors": shard `index` of `count`. Throws
// EngineError(kInvalidArgument) unless 0 <= index < count <= 99999.
std::string shard_file_name(int index, int count);

// The metadata of a shard whose tensors hold the runs `runs`, packed in
// this order: {"segments": ...}, adjacent runs merged.
SafetensorsMetadata shard_metadata(std::span<const FlatRun> runs);

// The shards of one checkpoint, indexed as one vector.
class ShardedVector {
 public:
  // Takes the shard files among `files` (the data files of the loaded
  // checkpoint `checkpoint`; files of other names are dropped) of a vector
  // of `total` elements. Throws EngineError(kInvalidArgument) naming the
  // checkpoint or the file unless the shard names agree on one count and
  // every index is there, each file's "segments" parse as runs inside
  // [0, total), and the runs of all shards tile [0, total) exactly once.
  ShardedVector(const std::filesystem::path& checkpoint,
                std::map<std::string, SafetensorsFile, std::less<>> files, int64_t total);

  int64_t total() const { return total_; }
  int shard_count() const { return static_cast<int>(shards_.size()); }

  // The elements of tensor `tensor` at `runs` (inside [0, total())),
  // packed in run order, copied from one shard after the other. Throws
  // EngineError(kInvalidArgument) naming the file when a shard lacks the
  // tensor or holds it as anything but fp32 of its runs' length, or naming
  // the run when it lies outside the vector.
  std::vector<float> read(std::string_view tensor, std::span<const FlatRun> runs) const;

 private:
  struct Piece {
    FlatRun run;         // where it lies in the vector
    int64_t packed = 0;  // its first element in the shard's tensors
  };
  struct Shard {
    SafetensorsFile file;
    std::vector<Piece> pieces;
    int64_t numel = 0;  // elements of each of its tensors
  };

  std::vector<Shard> shards_;  // by index
  int64_t total_ = 0;
};

}  // namespace mixtrain
