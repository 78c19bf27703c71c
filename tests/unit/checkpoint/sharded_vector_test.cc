// Why: a checkpoint written by N ranks, each saving the segments its ZeRO
// partition of the padded layout owns, must read back at any world size and
// stage as exactly the values that were saved, and a set of shards that
// does not hold every value exactly once (a shard missing, corrupt or
// overlapping another) must be refused naming the file.
#include "engine/checkpoint/sharded_vector.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_store.h"
#include "engine/common/error.h"
#include "engine/train/trainer_checkpoint_files.h"
#include "engine/zero/padded_weights.h"
#include "engine/zero/zero_partition.h"
#include "test_support/engine_error.h"
#include "test_support/temp_dir.h"

namespace mixtrain {
namespace {

namespace fs = std::filesystem;
using test_support::TempDir;

// Units of 258 (embeddings), 510 (blocks) and 12 (ln_f) values: padded at
// N = 4, so partitions split parameters and end in padding.
const GptConfig kConfig{2, 2, 6, 5, 38};
const int64_t kTotal = ParameterLayout(kConfig).param_count();
constexpr const char* kTensors[] = {"master", "adam_m", "adam_v"};

// Distinct values for tensor `which`, in plain order.
std::vector<float> plain_values(size_t which) {
  std::vector<float> values;
  for (int64_t i = 0; i < kTotal; ++i) values.push_back(float(i + 1) * (1.0f + float(which)));
  return values;
}

// The values of `plain` at `runs`, packed in run order.
std::vector<float> packed_at(const std::vector<float>& plain, const std::vector<FlatRun>& runs) {
  std::vector<float> packed;
  for (const FlatRun& run : runs)
    packed.insert(packed.end(), plain.begin() + run.offset, plain.begin() + run.offset + run.numel);
  return packed;
}

// The plain-layout runs that rank `rank` of `world` owns: its partition of
// the layout padded for `world` (stage >= 1), or everything (stage 0).
std::vector<FlatRun> owned_runs(int rank, int world, bool partitioned) {
  const ParameterLayout layout(kConfig, world);
  return plain_runs(layout,
                    partitioned ? ZeroPartition(layout, rank, world) : ZeroPartition(layout, 0, 1));
}

// Writes checkpoint step 1 into `dir` with one shard per entry of `runs`
// (named as `names` says, shard_file_name(i, runs.size()) by default).
fs::path write_shards(const fs::path& dir, const std::vector<std::vector<FlatRun>>& runs,
                      std::vector<std::string> names = {}) {
  const fs::path temporary = begin_checkpoint(dir, 1, 0);
  std::vector<ManifestFile> files;
  for (size_t s = 0; s < runs.size(); ++s) {
    if (names.size() <= s) names.push_back(shard_file_name(int(s), int(runs.size())));
    std::vector<std::vector<float>> values;
    std::vector<HostTensor> tensors;
    for (size_t t = 0; t < std::size(kTensors); ++t) {
      values.push_back(packed_at(plain_values(t), runs[s]));
      tensors.push_back(HostTensor{{kTensors[t], DType::kF32, {int64_t(values.back().size())}},
                                   values.back().data()});
    }
    files.push_back(write_checkpoint_file(temporary, names[s], tensors, shard_metadata(runs[s])));
  }
  return commit_checkpoint(temporary, 1, files, Json::object());
}

// The checkpoint in `dir` written by `world` ranks at stage >= 1 (or 0).
fs::path write_ranks(const fs::path& dir, int world, bool partitioned) {
  std::vector<std::vector<FlatRun>> runs;
  for (int r = 0; r < (partitioned ? world : 1); ++r)
    runs.push_back(owned_runs(r, world, partitioned));
  return write_shards(dir, runs);
}

ShardedVector open_shards(const fs::path& path) {
  LoadedCheckpoint checkpoint = load_checkpoint(path);
  return ShardedVector(path, std::move(checkpoint.files), kTotal);
}

// Whether opening the shards of `path` is refused naming every fragment.
::testing::AssertionResult refused(const fs::path& path,
                                   std::initializer_list<std::string> fragments) {
  return test_support::throws_invalid_argument([&] { open_shards(path); }, fragments);
}

// plain_runs names, in the plain layout, the very values that the padded
// layout holds at the partition's segments.
TEST(ShardedVectorTest, PlainRunsMatchThePaddedLayout) {
  const std::vector<float> plain = plain_values(0);
  for (int world : {1, 2, 4}) {
    const ParameterLayout layout(kConfig, world);
    const std::vector<float> padded = padded_weights(layout, plain);
    for (int rank = 0; rank < world; ++rank) {
      const ZeroPartition partition(layout, rank, world);
      const std::vector<FlatRun> runs = plain_runs(layout, partition);
      ASSERT_EQ(runs.size(), partition.segments().size());
      for (size_t i = 0; i < runs.size(); ++i) {
        const PartitionSegment& segment = partition.segments()[i];
        EXPECT_EQ(runs[i].numel, segment.numel);
        for (int64_t k = 0; k < segment.numel; ++k)
          ASSERT_EQ(plain[runs[i].offset + k], padded[segment.flat_offset + k]);
      }
    }
  }
}

// Shards of 4 ranks (and of 2, and stage 0's single shard) read back at
// 1, 2 and 4 ranks, partitioned or not, bit for bit.
TEST(ShardedVectorTest, ReadsBackAtAnyWorldSizeAndStageExactly) {
  for (const auto& [written_world, written_partitioned] :
       std::vector<std::pair<int, bool>>{{4, true}, {2, true}, {4, false}}) {
    TempDir dir;
    const ShardedVector shards =
        open_shards(write_ranks(dir.path(), written_world, written_partitioned));
    EXPECT_EQ(shards.shard_count(), written_partitioned ? written_world : 1);
    for (size_t t = 0; t < std::size(kTensors); ++t) {
      const std::vector<float> plain = plain_values(t);
      const FlatRun everything{0, kTotal};
      EXPECT_EQ(shards.read(kTensors[t], {&everything, 1}), plain);
      for (int world : {1, 2, 4}) {
        for (bool partitioned : {true, false}) {
          std::vector<float> assembled(plain.size(), 0.0f);
          for (int rank = 0; rank < world; ++rank) {
            const std::vector<FlatRun> runs = owned_runs(rank, world, partitioned);
            const std::vector<float> read = shards.read(kTensors[t], runs);
            ASSERT_EQ(read, packed_at(plain, runs))
                << "written by " << written_world << ", read by rank " << rank << " of " << world;
            size_t next = 0;
            for (const FlatRun& run : runs) {
              std::copy_n(read.begin() + next, run.numel, assembled.begin() + run.offset);
              next += run.numel;
            }
          }
          EXPECT_EQ(assembled, plain) << world << (partitioned ? " partitioned" : " replicated");
        }
      }
    }
  }
}

TEST(ShardedVectorTest, MetadataMergesAdjacentRuns) {
  EXPECT_EQ(shard_metadata(owned_runs(0, 4, false)).at(kShardSegmentsMetadataKey),
            "[[0," + std::to_string(kTotal) + "]]");
  const std::vector<FlatRun> runs{{10, 5}, {15, 5}, {30, 1}, {0, 2}};
  EXPECT_EQ(shard_metadata(runs).at(kShardSegmentsMetadataKey), "[[10,10],[30,1],[0,2]]");
  EXPECT_EQ(shard_file_name(3, 4), "shard-00003-of-00004.safetensors");
  EXPECT_THROW(shard_file_name(4, 4), EngineError);
}

TEST(ShardedVectorTest, CorruptShardIsRefusedNamingIt) {
  TempDir dir;
  const fs::path path = write_ranks(dir.path(), 4, true);
  const fs::path shard = path / "shard-00002-of-00004.safetensors";
  {
    std::fstream file(shard, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-5, std::ios::end);
    file.put('\x7f');
  }
  EXPECT_TRUE(refused(path, {"file shard-00002-of-00004.safetensors has CRC32C"}));
}

// Whether a checkpoint of shards holding `runs` (named `names`, by
// default shard_file_name's) is refused naming `fragment`.
::testing::AssertionResult shards_refused(const std::vector<std::vector<FlatRun>>& runs,
                                          const std::vector<std::string>& names,
                                          const std::string& fragment) {
  TempDir dir;
  return refused(write_shards(dir.path(), runs, names), {fragment});
}

TEST(ShardedVectorTest, RefusesShardsThatDoNotHoldEveryValueOnce) {
  const std::vector<FlatRun> rank0 = owned_runs(0, 2, true), rank1 = owned_runs(1, 2, true);
  const std::vector<FlatRun> all{{0, kTotal}};
  // Shard 1 of 2 was never written (and the manifest lacks it).
  EXPECT_TRUE(
      shards_refused({rank0}, {shard_file_name(0, 2)}, "lacks shard-00001-of-00002.safetensors"));
  EXPECT_TRUE(
      shards_refused({rank0, all}, {}, "shard-00001-of-00002.safetensors: its segment overlaps"));
  EXPECT_TRUE(
      shards_refused({rank1}, {}, "shard-00000-of-00001.safetensors: a gap precedes its segment"));
  EXPECT_TRUE(shards_refused({{{0, kTotal - 1}}}, {},
                             "the shards hold " + std::to_string(kTotal - 1) + " values"));
  EXPECT_TRUE(shards_refused({rank0, rank1}, {shard_file_name(0, 2), shard_file_name(1, 3)},
                             "its shard count 3 differs"));
  EXPECT_TRUE(shards_refused({all}, {"trainer.safetensors"}, "no shard files"));
  EXPECT_TRUE(shards_refused({{{kTotal - 1, 2}}}, {},
                             "segment [" + std::to_string(kTotal - 1) + ", 2] lies outside"));
}

TEST(ShardedVectorTest, ReadRefusesAMissingTensorNamingTheShard) {
  TempDir dir;
  const ShardedVector shards = open_shards(write_ranks(dir.path(), 2, true));
  const FlatRun run{0, 1};
  EXPECT_TRUE(test_support::throws_invalid_argument(
      [&] {
        shards.read("adam_w", {&run, 1});
      },
      {"shard-00000-of-00002.safetensors: lacks tensor \"adam_w\""}));
  const FlatRun outside{kTotal, 1};
  EXPECT_THROW(shards.read("master", {&outside, 1}), EngineError);
}

}  // namespace
}  // namespace mixtrain
