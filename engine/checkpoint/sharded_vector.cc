// Why: the shard naming, the "segments" metadata and the validated
// run-by-run copy out of shards declared in sharded_vector.h.
#include "engine/checkpoint/sharded_vector.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>
#include <tuple>

#include "engine/common/error.h"
#include "engine/common/json.h"

namespace mixtrain {
namespace {

constexpr int kMaxShards = 99999;  // five digits in the name

struct ShardName {
  int index = 0;
  int count = 0;
};

// The index and count of a name shard_file_name gives; nullopt otherwise.
std::optional<ShardName> parse_shard_file_name(std::string_view name) {
  ShardName parsed;
  const char* const end = name.data() + name.size();
  const auto number = [end](const char* from, int* value) {
    const auto result = std::from_chars(from, end, *value);
    return result.ec == std::errc() ? result.ptr : nullptr;
  };
  if (!name.starts_with("shard-")) return std::nullopt;
  const char* next = number(name.data() + 6, &parsed.index);
  if (next == nullptr || !std::string_view(next, end).starts_with("-of-")) return std::nullopt;
  next = number(next + 4, &parsed.count);
  if (next == nullptr || parsed.index < 0 || parsed.index >= parsed.count ||
      parsed.count > kMaxShards || shard_file_name(parsed.index, parsed.count) != name) {
    return std::nullopt;
  }
  return parsed;
}

[[noreturn]] void refuse(const SafetensorsFile& file, const std::string& problem) {
  throw EngineError(ErrorCode::kInvalidArgument,
                    "checkpoint shard " + file.path().string() + ": " + problem);
}

// The runs of `file`'s "segments" metadata, each inside [0, total), with
// where each starts in the file's tensors.
std::vector<std::pair<FlatRun, int64_t>> parse_segments(const SafetensorsFile& file,
                                                        int64_t total) {
  const auto found = file.metadata().find(kShardSegmentsMetadataKey);
  if (found == file.metadata().end()) {
    refuse(file, std::string("has no \"") + kShardSegmentsMetadataKey + "\" metadata");
  }
  Json segments;
  try {
    segments = parse_json(found->second);
  } catch (const EngineError& error) {
    refuse(file, std::string("\"segments\" metadata: ") + error.what());
  }
  if (!segments.is_array()) refuse(file, "\"segments\" metadata is not a JSON array");
  std::vector<std::pair<FlatRun, int64_t>> runs;
  int64_t packed = 0;
  for (const Json& segment : segments) {
    const bool pair = segment.is_array() && segment.size() == 2 && segment[0].is_number_integer() &&
                      segment[1].is_number_integer();
    if (!pair) refuse(file, "a \"segments\" entry is not [offset, numel]");
    const FlatRun run{segment[0].get<int64_t>(), segment[1].get<int64_t>()};
    if (run.offset < 0 || run.numel <= 0 || run.numel > total - run.offset) {
      refuse(file, "segment [" + std::to_string(run.offset) + ", " + std::to_string(run.numel) +
                       "] lies outside the " + std::to_string(total) + " values of the model");
    }
    runs.emplace_back(run, packed);
    packed += run.numel;
  }
  return runs;
}

}  // namespace

std::string shard_file_name(int index, int count) {
  MIXTRAIN_CHECK_ARG(
      index >= 0 && index < count && count <= kMaxShards,
      "shard_file_name: shard " + std::to_string(index) + " of " + std::to_string(count));
  char name[64];
  std::snprintf(name, sizeof(name), "shard-%05d-of-%05d.safetensors", index, count);
  return name;
}

SafetensorsMetadata shard_metadata(std::span<const FlatRun> runs) {
  std::vector<FlatRun> merged;
  for (const FlatRun& run : runs) {
    if (!merged.empty() && merged.back().offset + merged.back().numel == run.offset) {
      merged.back().numel += run.numel;
    } else {
      merged.push_back(run);
    }
  }
  Json segments = Json::array();
  for (const FlatRun& run : merged) segments.push_back({run.offset, run.numel});
  return {{kShardSegmentsMetadataKey, dump_json(segments)}};
}

ShardedVector::ShardedVector(const std::filesystem::path& checkpoint,
                             std::map<std::string, SafetensorsFile, std::less<>> files,
                             int64_t total)
    : total_(total) {
  const std::string where = "checkpoint " + checkpoint.string() + ": ";
  std::vector<std::optional<SafetensorsFile>> by_index;
  std::string first_name;
  for (auto& [name, file] : files) {
    const std::optional<ShardName> shard = parse_shard_file_name(name);
    if (!shard) continue;
    if (by_index.empty()) {
      by_index.resize(static_cast<size_t>(shard->count));
      first_name = name;
    }
    if (static_cast<int>(by_index.size()) != shard->count) {
      refuse(file, "its shard count " + std::to_string(shard->count) + " differs from " +
                       first_name + "'s");
    }
    by_index[static_cast<size_t>(shard->index)].emplace(std::move(file));
  }
  MIXTRAIN_CHECK_ARG(!by_index.empty(), where + "no shard files (" + shard_file_name(0, 1) +
                                            " and so on): not a checkpoint of this mixtrain");

  std::vector<std::tuple<int64_t, int64_t, size_t>> tiles;  // offset, numel, shard
  for (size_t index = 0; index < by_index.size(); ++index) {
    MIXTRAIN_CHECK_ARG(
        by_index[index].has_value(),
        where + "lacks " +
            shard_file_name(static_cast<int>(index), static_cast<int>(by_index.size())));
    Shard shard{std::move(*by_index[index]), {}, 0};
    for (const auto& [run, packed] : parse_segments(shard.file, total)) {
      shard.pieces.push_back(Piece{run, packed});
      shard.numel = packed + run.numel;
      tiles.emplace_back(run.offset, run.numel, index);
    }
    shards_.push_back(std::move(shard));
  }
  std::sort(tiles.begin(), tiles.end());
  int64_t covered = 0;
  for (const auto& [offset, numel, index] : tiles) {
    if (offset != covered) {
      refuse(shards_[index].file,
             std::string(offset < covered ? "its segment overlaps" : "a gap precedes its segment") +
                 " at value " + std::to_string(offset) + " of the model");
    }
    covered = offset + numel;
  }
  MIXTRAIN_CHECK_ARG(covered == total, where + "the shards hold " + std::to_string(covered) +
                                           " values, the model has " + std::to_string(total));
}

std::vector<float> ShardedVector::read(std::string_view tensor,
                                       std::span<const FlatRun> runs) const {
  std::vector<int64_t> destination;  // where each run starts in the result
  int64_t size = 0;
  for (const FlatRun& run : runs) {
    MIXTRAIN_CHECK_ARG(run.offset >= 0 && run.numel >= 0 && run.numel <= total_ - run.offset,
                       "ShardedVector::read: run [" + std::to_string(run.offset) + ", " +
                           std::to_string(run.numel) + "] lies outside the " +
                           std::to_string(total_) + " values");
    destination.push_back(size);
    size += run.numel;
  }
  std::vector<float> values(static_cast<size_t>(size));
  for (const Shard& shard : shards_) {
    const SafetensorsEntry* entry = shard.file.find(tensor);
    if (entry == nullptr) refuse(shard.file, "lacks tensor \"" + std::string(tensor) + "\"");
    if (entry->layout.dtype != DType::kF32 || entry->layout.shape != Shape{shard.numel}) {
      refuse(shard.file, "tensor \"" + std::string(tensor) + "\" is " +
                             dtype_name(entry->layout.dtype) + shape_string(entry->layout.shape) +
                             ", its segments need fp32" + shape_string(Shape{shard.numel}));
    }
    // The file's bytes may be unaligned: memcpy, never cast.
    const std::byte* source = shard.file.bytes(*entry).data();
    for (const Piece& piece : shard.pieces) {
      for (size_t i = 0; i < runs.size(); ++i) {
        const int64_t begin = std::max(piece.run.offset, runs[i].offset);
        const int64_t end =
            std::min(piece.run.offset + piece.run.numel, runs[i].offset + runs[i].numel);
        if (begin >= end) continue;
        std::memcpy(values.data() + destination[i] + (begin - runs[i].offset),
                    source + (piece.packed + begin - piece.run.offset) * sizeof(float),
                    static_cast<size_t>(end - begin) * sizeof(float));
      }
    }
  }
  return values;
}

}  // namespace mixtrain
