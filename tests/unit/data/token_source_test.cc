// Why: a token outside the model's vocabulary would index past the
// embedding table; the source loader must catch it and say where it is,
// and must resolve built-in names without touching the file system.
#include "engine/data/token_source.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/data/demo_corpus.h"
#include "data_test_util.h"

namespace mixtrain {
namespace {

using testing::llmc_token_file;
using testing::TempDir;
using testing::throws_invalid_argument;

TEST(TokenSource, TokenAtOrAboveVocabNamesFirstBadTokenAndPosition) {
  TempDir dir;
  const std::string path = dir.write("gpt2.bin", llmc_token_file({10, 99, 7, 100, 50256, 200}));
  EXPECT_TRUE(throws_invalid_argument([&] { load_token_source(path, config::DataFormat::kAuto, 100); },
                                      {path, "token 100 at position 3", "vocab 100"}));
  EXPECT_EQ(load_token_source(path, config::DataFormat::kAuto, 50257).size(), 6u);
}

TEST(TokenSource, TextAgainstSmallVocab) {
  TempDir dir;
  const std::string path = dir.write("t.txt", "abc");
  EXPECT_TRUE(throws_invalid_argument([&] { load_token_source(path, config::DataFormat::kText, 98); },
                                      {path, "token 98 at position 1"}));
}

TEST(TokenSource, VocabMustFitUint16) {
  EXPECT_TRUE(throws_invalid_argument(
      [] { load_token_source("builtin:demo", config::DataFormat::kAuto, 0); }, {"vocab 0"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] { load_token_source("builtin:demo", config::DataFormat::kAuto, 65537); }, {"vocab 65537"}));
}

TEST(TokenSource, BuiltinDemoIsTheDemoCorpus) {
  const std::string text = generate_demo_corpus(kDemoCorpusSeed);
  const TokenBuffer tokens = load_token_source(kDemoCorpusSource, config::DataFormat::kAuto, 256);
  EXPECT_EQ(tokens, TokenBuffer(text.begin(), text.end()));
  EXPECT_EQ(load_token_source(kDemoCorpusSource, config::DataFormat::kText, 128), tokens);
}

TEST(TokenSource, BuiltinErrors) {
  EXPECT_TRUE(throws_invalid_argument(
      [] { load_token_source("builtin:shakespeare", config::DataFormat::kAuto, 256); },
      {"unknown built-in data source 'builtin:shakespeare'", "builtin:demo"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] { load_token_source("builtin:demo", config::DataFormat::kTokens, 256); },
      {"builtin:demo", "format tokens"}));
}

TEST(TokenSource, FileErrorsPassThrough) {
  TempDir dir;
  const std::string path = dir.write("empty.bin", "");
  EXPECT_TRUE(throws_invalid_argument([&] { load_token_source(path, config::DataFormat::kAuto, 256); },
                                      {path, "empty"}));
}

}  // namespace
}  // namespace mixtrain
