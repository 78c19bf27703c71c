// Why: a token outside the model's vocabulary would index past the
// embedding table; the source loader must catch it and say where it is,
// and must resolve built-in names without touching the file system.
#include "engine/data/token_source.h"

#include <gtest/gtest.h>

#include <string>

#include "data_test_util.h"
#include "engine/data/demo_corpus.h"

namespace mixtrain {
namespace {

using testing::llmc_token_file;
using testing::TempDir;
using testing::test_tracker;
using testing::throws_invalid_argument;
using testing::tokens_of;

TEST(TokenSource, TokenAtOrAboveVocabNamesFirstBadTokenAndPosition) {
  TempDir dir;
  const std::string path = dir.write("gpt2.bin", llmc_token_file({10, 99, 7, 100, 50256, 200}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { load_token_source(path, config::DataFormat::kAuto, 100, test_tracker()); },
      {path, "token 100 at position 3", "vocab 100"}));
  EXPECT_EQ(load_token_source(path, config::DataFormat::kAuto, 50257, test_tracker()).size(), 6u);
}

TEST(TokenSource, TextAgainstSmallVocab) {
  TempDir dir;
  const std::string path = dir.write("t.txt", "abc");
  EXPECT_TRUE(throws_invalid_argument(
      [&] { load_token_source(path, config::DataFormat::kText, 98, test_tracker()); },
      {path, "token 98 at position 1"}));
}

TEST(TokenSource, VocabMustFitUint16) {
  EXPECT_TRUE(throws_invalid_argument(
      [] { load_token_source("builtin:demo", config::DataFormat::kAuto, 0, test_tracker()); },
      {"vocab 0"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] { load_token_source("builtin:demo", config::DataFormat::kAuto, 65537, test_tracker()); },
      {"vocab 65537"}));
}

TEST(TokenSource, BuiltinDemoIsTheDemoCorpus) {
  const std::string text = generate_demo_corpus(kDemoCorpusSeed);
  const std::vector<uint16_t> tokens = tokens_of(
      load_token_source(kDemoCorpusSource, config::DataFormat::kAuto, 256, test_tracker()));
  EXPECT_EQ(tokens, std::vector<uint16_t>(text.begin(), text.end()));
  EXPECT_EQ(tokens_of(load_token_source(kDemoCorpusSource, config::DataFormat::kText, 128,
                                        test_tracker())),
            tokens);
}

// Issue 29: the tokens a rank holds in memory count as host `data`, for as
// long as any part of the corpus lives, and the planner knows how many.
TEST(TokenSource, BuiltinCorpusIsCountedAsHostData) {
  MemoryTracker tracker;
  const size_t bytes = generate_demo_corpus(kDemoCorpusSeed).size();
  {
    const TokenCorpus tokens =
        load_token_source(kDemoCorpusSource, config::DataFormat::kAuto, 256, tracker);
    const TokenCorpus tail = tokens.slice(10, 20);
    EXPECT_EQ(tracker.current(MemoryPool::kHost, MemoryCategory::kData), bytes);
    EXPECT_EQ(tracker.current_total(MemoryPool::kDevice), 0u);
  }
  EXPECT_EQ(tracker.current(MemoryPool::kHost, MemoryCategory::kData), 0u);
  EXPECT_EQ(tracker.peak(MemoryPool::kHost, MemoryCategory::kData), bytes);
  EXPECT_EQ(corpus_bytes_in_memory(kDemoCorpusSource), static_cast<int64_t>(bytes));
}

TEST(TokenSource, BuiltinCorpusPastTheRamLimitIsOutOfMemoryNamingData) {
  MemoryTracker tracker;
  tracker.set_ram_limit(100 << 10, /*device_in_ram=*/true);
  try {
    load_token_source(kDemoCorpusSource, config::DataFormat::kAuto, 256, tracker);
    FAIL() << "a 300 KiB corpus fit a 100 KiB limit";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("more for data in the host pool"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("past this rank's memory limit"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(tracker.current_total(MemoryPool::kHost), 0u);
}

// A file is mapped, not held: no process memory to count.
TEST(TokenSource, FileCountsNothing) {
  TempDir dir;
  MemoryTracker tracker;
  tracker.set_ram_limit(1024, /*device_in_ram=*/true);
  const std::string path = dir.write("t.txt", std::string(64 << 10, 'a'));
  EXPECT_EQ(load_token_source(path, config::DataFormat::kText, 256, tracker).size(), 64u << 10);
  EXPECT_EQ(tracker.peak_total(MemoryPool::kHost), 0u);
  EXPECT_EQ(corpus_bytes_in_memory(path), 0);
}

TEST(TokenSource, BuiltinErrors) {
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        load_token_source("builtin:shakespeare", config::DataFormat::kAuto, 256, test_tracker());
      },
      {"unknown built-in data source 'builtin:shakespeare'", "builtin:demo"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] { load_token_source("builtin:demo", config::DataFormat::kTokens, 256, test_tracker()); },
      {"builtin:demo", "format tokens"}));
}

TEST(TokenSource, FileErrorsPassThrough) {
  TempDir dir;
  const std::string path = dir.write("empty.bin", "");
  EXPECT_TRUE(throws_invalid_argument(
      [&] { load_token_source(path, config::DataFormat::kAuto, 256, test_tracker()); },
      {path, "empty"}));
}

}  // namespace
}  // namespace mixtrain
