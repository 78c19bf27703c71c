// Why: a resumed run is only as good as the checkpoint it resumes from, so
// these tests damage checkpoints the ways crashes and disks do (truncation,
// a flipped byte, a missing manifest, a dead writer's temporary directory)
// and check each is refused or ignored, and that retention keeps the newest.
#include "engine/checkpoint/checkpoint_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_fence.h"
#include "engine/checkpoint/crc32c.h"
#include "engine/checkpoint/manifest.h"
#include "engine/common/error.h"
#include "test_support/engine_error.h"
#include "test_support/file_damage.h"
#include "test_support/temp_dir.h"

namespace mixtrain {
namespace {

namespace fs = std::filesystem;
using test_support::flip_bit;
using test_support::TempDir;
using test_support::truncate_tail;
using ::testing::HasSubstr;

// The trainer-side data of one checkpoint, owning the tensor bytes.
struct TrainerData {
  std::vector<float> master;
  std::vector<float> moment;
  std::vector<uint16_t> bf16_params;
  std::vector<int32_t> rng;

  explicit TrainerData(int64_t step) {
    for (int i = 0; i < 1000; ++i) master.push_back(0.001f * float(i) + float(step));
    for (int i = 0; i < 1000; ++i) moment.push_back(-1e-7f * float(i * i) - float(step));
    for (int i = 0; i < 64; ++i) bf16_params.push_back(uint16_t(0x3f80 + i + step));
    rng = {int32_t(step), 7, -3};
  }

  CheckpointFiles files() const {
    return {{"model.safetensors",
             {{{"wte.master", DType::kF32, {10, 100}}, master.data()},
              {{"wte.bf16", DType::kBF16, {64}}, bf16_params.data()}}},
            {"optimizer.safetensors",
             {{{"wte.exp_avg", DType::kF32, {1000}}, moment.data()},
              {{"rng", DType::kI32, {3}}, rng.data()}}}};
  }
};

Json trainer_state(int64_t step) {
  Json state = Json::object();
  state["loss_scale"] = 65536.0;
  state["sampler"] = parse_json(R"({"epoch":2,"position":12345})");
  state["step"] = step;
  return state;
}

fs::path save_step(const fs::path& dir, int64_t step) {
  const TrainerData data(step);
  return save_checkpoint(dir, step, data.files(), trainer_state(step));
}

// The message with which load_checkpoint(path) is refused ("" if loaded).
std::string load_error(const fs::path& path) {
  try {
    load_checkpoint(path);
  } catch (const EngineError& error) {
    return error.what();
  }
  return "";
}

std::vector<int64_t> listed_steps(const fs::path& dir) {
  std::vector<int64_t> steps;
  for (const CheckpointInfo& info : list_checkpoints(dir)) steps.push_back(info.step);
  return steps;
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Crc32cTest, MatchesKnownVectors) {
  const std::string digits = "123456789";
  EXPECT_EQ(crc32c(std::as_bytes(std::span(digits))), 0xE3069283u);
  EXPECT_EQ(crc32c({}), 0u);
  const std::vector<std::byte> zeros(32, std::byte{0});
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);  // RFC 3720 B.4: 32 bytes of zeros
  const std::vector<std::byte> ones(32, std::byte{0xFF});
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);  // RFC 3720 B.4: 32 bytes of 0xFF
  // Extending in pieces equals one pass, whatever the split.
  const auto bytes = std::as_bytes(std::span(digits));
  for (size_t split = 0; split <= bytes.size(); ++split) {
    EXPECT_EQ(crc32c_extend(crc32c(bytes.first(split)), bytes.subspan(split)), 0xE3069283u);
  }
}

TEST(CheckpointStoreTest, SaveThenLoadIsBitExact) {
  TempDir dir;
  const TrainerData data(500);
  const fs::path path = save_checkpoint(dir.path(), 500, data.files(), trainer_state(500));
  EXPECT_EQ(path, dir.path() / "step_00000500");
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"step_00000500"});  // no temporaries
  EXPECT_EQ(entries(path), (std::vector<std::string>{"manifest.json", "model.safetensors",
                                                     "optimizer.safetensors"}));

  const LoadedCheckpoint loaded = load_checkpoint(path);
  EXPECT_EQ(loaded.step, 500);
  EXPECT_EQ(loaded.state, trainer_state(500));
  const auto master = loaded.file("model.safetensors").bytes("wte.master");
  ASSERT_EQ(master.size(), data.master.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(master.data(), data.master.data(), master.size()), 0);
  const auto bf16 = loaded.file("model.safetensors").bytes("wte.bf16");
  EXPECT_EQ(std::memcmp(bf16.data(), data.bf16_params.data(), bf16.size()), 0);
  const auto moment = loaded.file("optimizer.safetensors").bytes("wte.exp_avg");
  EXPECT_EQ(std::memcmp(moment.data(), data.moment.data(), moment.size()), 0);
  EXPECT_EQ(loaded.file("optimizer.safetensors").find("rng")->layout.shape, Shape{3});
  EXPECT_THROW(loaded.file("absent.safetensors"), EngineError);
}

TEST(CheckpointStoreTest, ManifestRecordsEverySizeAndChecksum) {
  TempDir dir;
  const fs::path path = save_step(dir.path(), 3);
  std::ifstream in(path / "manifest.json");
  const CheckpointManifest manifest =
      parse_manifest(std::string(std::istreambuf_iterator<char>(in), {}));
  EXPECT_EQ(manifest.step, 3);
  ASSERT_EQ(manifest.files.size(), 2u);
  for (const ManifestFile& file : manifest.files) {
    std::ifstream data(path / file.name, std::ios::binary);
    const std::string bytes(std::istreambuf_iterator<char>(data), {});
    EXPECT_EQ(file.bytes, bytes.size());
    EXPECT_EQ(file.crc32c, crc32c(std::as_bytes(std::span(bytes))));
  }
}

TEST(CheckpointStoreTest, TruncatedDataFileIsRefused) {
  TempDir dir;
  const fs::path path = save_step(dir.path(), 10);
  truncate_tail(path / "optimizer.safetensors");
  const std::string message = load_error(path);
  EXPECT_THAT(message, HasSubstr("file optimizer.safetensors has"));
  EXPECT_THAT(message, HasSubstr("(truncated or replaced)"));
  EXPECT_TRUE(list_checkpoints(dir.path()).empty());  // sizes no longer match
}

TEST(CheckpointStoreTest, FlippedByteIsRefusedByChecksum) {
  TempDir dir;
  const fs::path path = save_step(dir.path(), 10);
  flip_bit(path / "model.safetensors");
  const std::string message = load_error(path);
  EXPECT_THAT(message, HasSubstr("checkpoint " + path.string() + ": file model.safetensors"));
  EXPECT_THAT(message, HasSubstr("(corrupt)"));
}

TEST(CheckpointStoreTest, MissingDataFileIsRefused) {
  TempDir dir;
  const fs::path path = save_step(dir.path(), 10);
  fs::remove(path / "model.safetensors");
  EXPECT_THAT(load_error(path), HasSubstr("model.safetensors"));
  EXPECT_TRUE(list_checkpoints(dir.path()).empty());
}

TEST(CheckpointStoreTest, CheckpointWithoutValidManifestIsIgnored) {
  TempDir dir;
  save_step(dir.path(), 100);
  const fs::path newer = save_step(dir.path(), 200);
  const fs::path newest = save_step(dir.path(), 300);
  fs::remove(newest / "manifest.json");
  std::ofstream(newer / "manifest.json", std::ios::trunc) << "{\"format\":";
  EXPECT_EQ(listed_steps(dir.path()), std::vector<int64_t>{100});
  EXPECT_EQ(latest_checkpoint(dir.path())->step, 100);
  EXPECT_THAT(load_error(newest), HasSubstr("manifest.json"));
  EXPECT_THAT(load_error(newer), HasSubstr("JSON parse error"));
}

TEST(CheckpointStoreTest, ListIgnoresForeignNamesAndMismatchedSteps) {
  TempDir dir;
  const fs::path saved = save_step(dir.path(), 7);
  fs::create_directory(dir.path() / "step_7");  // not the canonical name
  fs::create_directory(dir.path() / "notes");
  std::ofstream(dir.path() / "step_00000008") << "a file, not a directory";
  fs::copy(saved, dir.path() / "step_00000009");  // manifest says step 7
  EXPECT_EQ(listed_steps(dir.path()), std::vector<int64_t>{7});
  EXPECT_TRUE(list_checkpoints(dir.path() / "absent").empty());
  EXPECT_FALSE(latest_checkpoint(dir.path() / "absent").has_value());
}

TEST(CheckpointStoreTest, ListAndLatestOrderByStep) {
  TempDir dir;
  for (int64_t step : {2000, 500, 100000000, 1500}) save_step(dir.path(), step);
  EXPECT_EQ(listed_steps(dir.path()), (std::vector<int64_t>{500, 1500, 2000, 100000000}));
  EXPECT_EQ(latest_checkpoint(dir.path())->path, dir.path() / "step_100000000");
}

// Issue 29: temporaries are named by the attempt's epoch (a pid means
// nothing on another host or in another pid namespace), and those of ended
// attempts are removed while the current attempt's, being written, stay.
TEST(CheckpointStoreTest, TemporariesAreNamedByEpochAndOnlyEarlierEpochsAreCleaned) {
  TempDir dir;
  save_step(dir.path(), 100);
  EXPECT_EQ(checkpoint_temporary_dir(dir.path(), 200, 3), dir.path() / "step_00000200.tmp-epoch-3");
  // Attempts 1 and 2 were killed mid-checkpoint: complete-looking content,
  // but never renamed.
  const fs::path killed = checkpoint_temporary_dir(dir.path(), 200, 1);
  fs::copy(dir.path() / "step_00000100", killed);
  const fs::path superseded = checkpoint_temporary_dir(dir.path(), 300, 2);
  fs::create_directory(superseded);
  // Attempt 3 is writing step 400; a newer attempt 4 (this one is stale) too.
  const fs::path writing = begin_checkpoint(dir.path(), 400, 3);
  EXPECT_EQ(writing, checkpoint_temporary_dir(dir.path(), 400, 3));
  const fs::path newer = checkpoint_temporary_dir(dir.path(), 500, 4);
  fs::create_directory(newer);
  fs::create_directory(dir.path() / "step_00000600.tmp-1234");  // not ours: left alone
  EXPECT_EQ(listed_steps(dir.path()), std::vector<int64_t>{100});

  std::vector<fs::path> removed = remove_stale_checkpoint_temporaries(dir.path(), 3);
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<fs::path>{killed, superseded}));
  EXPECT_EQ(entries(dir.path()),
            (std::vector<std::string>{"step_00000100", "step_00000400.tmp-epoch-3",
                                      "step_00000500.tmp-epoch-4", "step_00000600.tmp-1234"}));
  EXPECT_TRUE(remove_stale_checkpoint_temporaries(dir.path(), 3).empty());
  // Once attempt 3 has ended, its own go too.
  EXPECT_EQ(remove_stale_checkpoint_temporaries(dir.path(), 4), std::vector<fs::path>{writing});
  EXPECT_TRUE(remove_stale_checkpoint_temporaries(dir.path() / "absent", 9).empty());
}

// Every rank of an attempt claims the directory, on whatever host: each
// claim removes what earlier attempts left, never the claimer's own.
TEST(CheckpointStoreTest, ClaimingAnEpochRemovesEarlierEpochsTemporaries) {
  TempDir dir;
  const fs::path killed = checkpoint_temporary_dir(dir.path(), 7, 1);
  fs::create_directories(killed / "nested");
  std::ofstream(killed / "nested" / "shard.safetensors") << "partial";
  claim_checkpoint_epoch(dir.path(), 2);
  const fs::path writing = begin_checkpoint(dir.path(), 8, 2);
  claim_checkpoint_epoch(dir.path(), 2);  // a second rank of attempt 2, later
  EXPECT_EQ(entries(dir.path()),
            (std::vector<std::string>{"epoch-2", "step_00000008.tmp-epoch-2"}));
  EXPECT_TRUE(fs::exists(writing));
}

TEST(CheckpointStoreTest, RetentionKeepsTheNewestK) {
  TempDir dir;
  for (int64_t step : {100, 200, 300, 400, 500}) save_step(dir.path(), step);
  fs::create_directory(dir.path() / "step_00000050");  // no manifest: left alone
  const std::vector<fs::path> removed = retain_checkpoints(dir.path(), 2, 0);
  EXPECT_EQ(removed,
            (std::vector<fs::path>{dir.path() / "step_00000100", dir.path() / "step_00000200",
                                   dir.path() / "step_00000300"}));
  EXPECT_EQ(listed_steps(dir.path()), (std::vector<int64_t>{400, 500}));
  EXPECT_EQ(entries(dir.path()),
            (std::vector<std::string>{"step_00000050", "step_00000400", "step_00000500"}));
  EXPECT_TRUE(retain_checkpoints(dir.path(), 2, 0).empty());
  EXPECT_THROW(retain_checkpoints(dir.path(), 0, 0), EngineError);
}

TEST(CheckpointStoreTest, FailedSaveLeavesNoCheckpointAndNoTemporary) {
  TempDir dir;
  const TrainerData data(1);
  CheckpointFiles files = data.files();
  // The second file fails mid-write, after the first was written.
  files["zz.safetensors"] = {{{"broken", DType::kF32, {4}}, nullptr}};
  EXPECT_THAT([&] { save_checkpoint(dir.path(), 1, files, trainer_state(1)); },
              ::testing::ThrowsMessage<EngineError>(HasSubstr("tensor \"broken\" has no data")));
  EXPECT_TRUE(entries(dir.path()).empty());
  EXPECT_FALSE(latest_checkpoint(dir.path()).has_value());
}

TEST(CheckpointStoreTest, SaveRefusesBadArguments) {
  TempDir dir;
  const TrainerData data(1);
  save_checkpoint(dir.path(), 1, data.files(), trainer_state(1));
  EXPECT_THAT([&] { save_checkpoint(dir.path(), 1, data.files(), trainer_state(1)); },
              ::testing::ThrowsMessage<EngineError>(HasSubstr("already exists")));
  EXPECT_THROW(save_checkpoint(dir.path(), -1, data.files(), trainer_state(1)), EngineError);
  EXPECT_THROW(save_checkpoint(dir.path(), 2, data.files(), Json::array()), EngineError);
  for (const char* name : {"../escape.safetensors", "manifest.json", ".hidden.safetensors",
                           "model.bin", "a b.safetensors"}) {
    CheckpointFiles files = {{name, {}}};
    EXPECT_THROW(save_checkpoint(dir.path(), 3, files, trainer_state(3)), EngineError) << name;
  }
  EXPECT_EQ(listed_steps(dir.path()), std::vector<int64_t>{1});
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"step_00000001"});
}

// A resume passes over a damaged newest checkpoint; when training comes
// back to its step, that step must be written again (not refused as
// "already exists"), and the damaged directory kept, under a name that no
// listing, resume or retention takes for a checkpoint.
TEST(CheckpointStoreTest, SavingADamagedStepAgainSetsTheDamagedOneAside) {
  TempDir dir;
  save_step(dir.path(), 1);
  truncate_tail(save_step(dir.path(), 2) / "model.safetensors");
  const fs::path bad_manifest = save_step(dir.path(), 3);
  std::ofstream(bad_manifest / "manifest.json", std::ios::trunc) << "{\"format\":";
  EXPECT_EQ(listed_steps(dir.path()), std::vector<int64_t>{1});

  save_step(dir.path(), 2);
  save_step(dir.path(), 3);
  EXPECT_EQ(listed_steps(dir.path()), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(entries(dir.path()),
            (std::vector<std::string>{"step_00000001", "step_00000002", "step_00000002.damaged-1",
                                      "step_00000003", "step_00000003.damaged-1"}));
  EXPECT_THAT(load_error(dir.path() / "step_00000002.damaged-1"), HasSubstr("truncated"));
  EXPECT_EQ(load_checkpoint(dir.path() / "step_00000002").state, trainer_state(2));
  retain_checkpoints(dir.path(), 1, 0);
  EXPECT_EQ(entries(dir.path()),
            (std::vector<std::string>{"step_00000002.damaged-1", "step_00000003",
                                      "step_00000003.damaged-1"}));
}

TEST(CheckpointStoreTest, SetAsideMovesOnlyWhatFailsToVerify) {
  TempDir dir;
  EXPECT_FALSE(set_aside_damaged_checkpoint(dir.path(), 5).has_value());  // absent
  const fs::path path = save_step(dir.path(), 5);
  EXPECT_FALSE(set_aside_damaged_checkpoint(dir.path(), 5).has_value());  // intact
  EXPECT_THAT([&] { save_step(dir.path(), 5); },
              ::testing::ThrowsMessage<EngineError>(HasSubstr("already exists")));
  for (int k = 1; k <= 2; ++k) {  // a bit flip keeps its size: listed, but refused on load
    flip_bit(path / "optimizer.safetensors");
    EXPECT_EQ(listed_steps(dir.path()), std::vector<int64_t>{5});
    const std::optional<SetAsideCheckpoint> aside = set_aside_damaged_checkpoint(dir.path(), 5);
    ASSERT_TRUE(aside.has_value());
    EXPECT_EQ(aside->path, dir.path() / ("step_00000005.damaged-" + std::to_string(k)));
    EXPECT_THAT(aside->reason, HasSubstr("file optimizer.safetensors has CRC32C"));
    EXPECT_TRUE(list_checkpoints(dir.path()).empty());
    save_step(dir.path(), 5);
  }
  EXPECT_EQ(entries(dir.path()),
            (std::vector<std::string>{"step_00000005", "step_00000005.damaged-1",
                                      "step_00000005.damaged-2"}));
}

TEST(CheckpointStoreTest, StateOnlyCheckpointRoundTrips) {
  TempDir dir;
  const fs::path path = save_checkpoint(dir.path() / "nested" / "dir", 0, {}, trainer_state(0));
  const LoadedCheckpoint loaded = load_checkpoint(path);
  EXPECT_EQ(loaded.step, 0);
  EXPECT_TRUE(loaded.files.empty());
  EXPECT_EQ(loaded.state, trainer_state(0));
}

// The ranks of a job build one checkpoint: the owner begins it, each
// writer (here: a child process, as another rank would be) writes its file
// into the owner's temporary directory, and the owner commits them all.
TEST(CheckpointBuilderTest, ManifestListsEveryWritersFile) {
  TempDir dir;
  const TrainerData data(5);
  const fs::path temporary = begin_checkpoint(dir.path(), 5, 1);
  EXPECT_EQ(temporary, checkpoint_temporary_dir(dir.path(), 5, 1));
  const CheckpointFiles files = data.files();
  std::vector<ManifestFile> written;
  for (const auto& [name, tensors] : files) {
    const pid_t child = ::fork();
    if (child == 0) {
      try {
        write_checkpoint_file(checkpoint_temporary_dir(dir.path(), 5, 1), name, tensors);
      } catch (const EngineError&) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << name;
    std::ifstream in(temporary / name, std::ios::binary);
    const std::string bytes(std::istreambuf_iterator<char>(in), {});
    written.push_back(ManifestFile{name, bytes.size(), crc32c(std::as_bytes(std::span(bytes)))});
  }
  EXPECT_TRUE(list_checkpoints(dir.path()).empty());  // nothing until the commit
  const fs::path path = commit_checkpoint(temporary, 5, written, trainer_state(5));
  EXPECT_EQ(path, dir.path() / "step_00000005");
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"step_00000005"});
  std::ifstream in(path / "manifest.json");
  const CheckpointManifest manifest =
      parse_manifest(std::string(std::istreambuf_iterator<char>(in), {}));
  ASSERT_EQ(manifest.files.size(), written.size());
  for (size_t i = 0; i < written.size(); ++i) {
    EXPECT_EQ(manifest.files[i].name, written[i].name);
    EXPECT_EQ(manifest.files[i].bytes, written[i].bytes);
    EXPECT_EQ(manifest.files[i].crc32c, written[i].crc32c);
  }
  EXPECT_EQ(load_checkpoint(path).state, trainer_state(5));
}

// A job killed after its ranks wrote their files but before the commit:
// the checkpoint never appears, and what it left goes once its attempt ended.
TEST(CheckpointBuilderTest, CrashBeforeCommitLeavesOnlyAnIgnoredTemporary) {
  TempDir dir;
  save_step(dir.path(), 1);
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      const TrainerData data(2);
      const fs::path temporary = begin_checkpoint(dir.path(), 2, 0);
      for (const auto& [name, tensors] : data.files())
        write_checkpoint_file(temporary, name, tensors);
    } catch (const EngineError&) {
      ::_exit(1);
    }
    ::_exit(0);  // dies without commit_checkpoint
  }
  ::waitpid(child, nullptr, 0);
  const fs::path orphan = checkpoint_temporary_dir(dir.path(), 2, 0);
  EXPECT_EQ(entries(orphan),
            (std::vector<std::string>{"model.safetensors", "optimizer.safetensors"}));
  EXPECT_EQ(listed_steps(dir.path()), std::vector<int64_t>{1});
  EXPECT_EQ(latest_checkpoint(dir.path())->step, 1);
  EXPECT_TRUE(retain_checkpoints(dir.path(), 3, 0).empty());
  EXPECT_EQ(remove_stale_checkpoint_temporaries(dir.path(), 1), std::vector<fs::path>{orphan});
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"step_00000001"});
}

TEST(CheckpointBuilderTest, CommitRefusesFilesThatAreNotAsListed) {
  TempDir dir;
  const TrainerData data(3);
  const fs::path temporary = begin_checkpoint(dir.path(), 3, 0);
  std::vector<ManifestFile> written;
  for (const auto& [name, tensors] : data.files())
    written.push_back(write_checkpoint_file(temporary, name, tensors));
  // Whether committing `files` as step `step` is refused naming `fragment`.
  const auto refused = [&](const std::vector<ManifestFile>& files, const std::string& fragment,
                           int64_t step = 3) {
    return test_support::throws_invalid_argument(
        [&] { commit_checkpoint(temporary, step, files, trainer_state(3)); }, {fragment});
  };
  std::vector<ManifestFile> absent = written;
  absent.push_back(ManifestFile{"shard-00002-of-00003.safetensors", 10, 0});
  EXPECT_TRUE(refused(absent,
                      "file shard-00002-of-00003.safetensors is missing or not of its "
                      "recorded size"));
  std::vector<ManifestFile> resized = written;
  resized[0].bytes += 1;
  EXPECT_TRUE(refused(resized, "file model.safetensors is missing"));
  EXPECT_TRUE(refused({written[0], written[0]}, "listed twice"));
  EXPECT_TRUE(refused(written, "not the temporary directory of step 4", 4));
  EXPECT_TRUE(list_checkpoints(dir.path()).empty());
  abort_checkpoint(temporary);
  EXPECT_TRUE(entries(dir.path()).empty());
  EXPECT_THROW(write_checkpoint_file(temporary, "../x.safetensors", {}), EngineError);
}

TEST(ManifestTest, RefusesMalformedManifests) {
  const std::string valid =
      R"({"format":"mixtrain-checkpoint","version":1,"step":5,"checksum":"crc32c",)"
      R"("files":[{"name":"a.safetensors","bytes":10,"crc32c":"0000abcd"}],"state":{}})";
  EXPECT_EQ(parse_manifest(valid).files.at(0).crc32c, 0xabcdu);
  auto refused = [&](const std::string& from, const std::string& to) {
    std::string text = valid;
    text.replace(text.find(from), from.size(), to);
    try {
      parse_manifest(text);
    } catch (const EngineError& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  EXPECT_THAT(refused("\"version\":1", "\"version\":2"), HasSubstr("unsupported version 2"));
  EXPECT_THAT(refused("mixtrain-checkpoint", "other"), HasSubstr("\"format\""));
  EXPECT_THAT(refused("\"step\":5", "\"step\":-5"), HasSubstr("negative step"));
  EXPECT_THAT(refused("\"step\":5", "\"step\":\"5\""),
              HasSubstr("\"step\" must be an integer, not string"));
  EXPECT_THAT(refused("0000abcd", "abcd"), HasSubstr("not 8 hex digits"));
  EXPECT_THAT(refused("0000abcd", "0000abcx"), HasSubstr("not 8 hex digits"));
  EXPECT_THAT(refused("a.safetensors", "../a.safetensors"), HasSubstr("invalid file name"));
  EXPECT_THAT(refused("\"bytes\":10", "\"bytes\":-1"), HasSubstr("negative size"));
  EXPECT_THAT(refused("\"state\":{}", "\"state\":[]"),
              HasSubstr("\"state\" must be an object, not array"));
  EXPECT_THAT(refused(R"("crc32c","files")", R"("xxh64","files")"), HasSubstr("checksum"));
  EXPECT_THAT(refused("}],", R"(},{"name":"a.safetensors","bytes":1,"crc32c":"00000000"}],)"),
              HasSubstr("listed twice"));
}

}  // namespace
}  // namespace mixtrain
