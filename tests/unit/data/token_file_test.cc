// Why: the loader is the only gate between files on disk and training; it
// must read both formats exactly, pick the right one in auto mode, and say
// precisely what is wrong with a broken file.
#include "engine/data/token_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data_test_util.h"

namespace mixtrain {
namespace {

using testing::llmc_token_file;
using testing::tokens_of;
using Tokens = std::vector<uint16_t>;
using testing::TempDir;
using testing::throws_invalid_argument;

TEST(TokenFile, TextIsOneTokenPerByte) {
  TempDir dir;
  const std::string text = std::string("hi\n\x01\xff", 5);
  const std::string path = dir.write("corpus.txt", text);
  EXPECT_EQ(tokens_of(load_token_file(path, config::DataFormat::kText)),
            (Tokens{'h', 'i', '\n', 1, 255}));
  EXPECT_EQ(tokens_of(load_token_file(path, config::DataFormat::kAuto)),
            (Tokens{'h', 'i', '\n', 1, 255}));
}

TEST(TokenFile, LargeTextIsItsOwnTokens) {
  TempDir dir;
  std::string text(3 * (1 << 20) + 17, '\0');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(i * 7 % 251);
  const TokenCorpus tokens = load_token_file(dir.write("big.txt", text), config::DataFormat::kText);
  ASSERT_EQ(tokens.size(), text.size());
  for (size_t i = 0; i < text.size(); ++i) ASSERT_EQ(tokens[i], i * 7 % 251) << "at " << i;
}

TEST(TokenFile, LlmcTokensRoundTrip) {
  TempDir dir;
  const Tokens tokens = {0, 1, 255, 256, 50256, 65535, 12345};
  const std::string path = dir.write("tokens.bin", llmc_token_file(tokens));
  EXPECT_EQ(tokens_of(load_token_file(path, config::DataFormat::kTokens)), tokens);
  EXPECT_EQ(tokens_of(load_token_file(path, config::DataFormat::kAuto)), tokens);
}

TEST(TokenFile, AutoReadsATokenFileAsTextWhenFormatIsText) {
  TempDir dir;
  const std::string bytes = llmc_token_file({7});
  const TokenCorpus as_text = load_token_file(dir.write("t.bin", bytes), config::DataFormat::kText);
  EXPECT_EQ(as_text.size(), bytes.size());
}

TEST(TokenFile, AutoTreatsShortOrMagiclessFilesAsText) {
  TempDir dir;
  EXPECT_EQ(tokens_of(load_token_file(dir.write("short.txt", "abc"), config::DataFormat::kAuto)),
            (Tokens{'a', 'b', 'c'}));
  std::string other_magic = llmc_token_file({1, 2}, 2, 20240521);
  EXPECT_EQ(load_token_file(dir.write("m.bin", other_magic), config::DataFormat::kAuto).size(),
            other_magic.size());
}

TEST(TokenFile, MissingFileNamesPathAndReason) {
  TempDir dir;
  const std::string path = dir.path("no-such-file.txt");
  EXPECT_TRUE(throws_invalid_argument([&] { load_token_file(path, config::DataFormat::kAuto); },
                                      {path, "cannot open", "No such file"}));
}

TEST(TokenFile, DirectoryIsRejected) {
  TempDir dir;
  const std::string path = dir.path("sub");
  std::filesystem::create_directory(path);
  EXPECT_TRUE(throws_invalid_argument([&] { load_token_file(path, config::DataFormat::kText); },
                                      {path, "directory"}));
}

TEST(TokenFile, EmptyFileIsRejected) {
  TempDir dir;
  const std::string path = dir.write("empty.txt", "");
  for (config::DataFormat format :
       {config::DataFormat::kAuto, config::DataFormat::kText, config::DataFormat::kTokens}) {
    EXPECT_TRUE(throws_invalid_argument([&] { load_token_file(path, format); }, {path, "empty"}));
  }
}

TEST(TokenFile, BadMagicWithTokensFormat) {
  TempDir dir;
  const std::string path = dir.write("bad.bin", llmc_token_file({1, 2, 3}, 3, 12345));
  EXPECT_TRUE(throws_invalid_argument([&] { load_token_file(path, config::DataFormat::kTokens); },
                                      {path, "bad magic 12345", "20240520"}));
}

TEST(TokenFile, UnsupportedVersion) {
  TempDir dir;
  const std::string path = dir.write("v2.bin", llmc_token_file({1, 2, 3}, 3, 20240520, 2));
  EXPECT_TRUE(throws_invalid_argument([&] { load_token_file(path, config::DataFormat::kAuto); },
                                      {path, "unsupported token file version 2"}));
}

TEST(TokenFile, TruncatedPayload) {
  TempDir dir;
  std::string bytes = llmc_token_file({1, 2, 3, 4});
  bytes.pop_back();
  const std::string path = dir.write("cut.bin", bytes);
  EXPECT_TRUE(throws_invalid_argument([&] { load_token_file(path, config::DataFormat::kTokens); },
                                      {path, "declares 4 tokens", "7 bytes", "truncated"}));
}

TEST(TokenFile, CountLargerThanFile) {
  TempDir dir;
  const std::string path = dir.write("lie.bin", llmc_token_file({1, 2}, 1000));
  EXPECT_TRUE(throws_invalid_argument([&] { load_token_file(path, config::DataFormat::kAuto); },
                                      {path, "declares 1000 tokens", "truncated"}));
}

TEST(TokenFile, TrailingBytesAfterTokens) {
  TempDir dir;
  const std::string path = dir.write("long.bin", llmc_token_file({1, 2, 3}, 2));
  EXPECT_TRUE(throws_invalid_argument([&] { load_token_file(path, config::DataFormat::kTokens); },
                                      {path, "declares 2 tokens", "trailing"}));
}

TEST(TokenFile, HeaderShorterThan1024Bytes) {
  TempDir dir;
  const std::string path = dir.write("head.bin", llmc_token_file({}, 0).substr(0, 100));
  EXPECT_TRUE(throws_invalid_argument([&] { load_token_file(path, config::DataFormat::kAuto); },
                                      {path, "100 bytes", "1024-byte", "truncated"}));
  const std::string text_path = dir.write("text.txt", "plain words");
  EXPECT_TRUE(throws_invalid_argument(
      [&] { load_token_file(text_path, config::DataFormat::kTokens); }, {text_path, "1024-byte"}));
}

TEST(TokenFile, TinyShakespeareIfPresent) {
  const std::string path = std::string(MIXTRAIN_SHARED_DATA_DIR) + "/tinyshakespeare.txt";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  const std::vector<uint16_t> tokens = tokens_of(load_token_file(path, config::DataFormat::kAuto));
  ASSERT_EQ(tokens.size(), 1115394u);
  EXPECT_EQ(std::string(tokens.begin(), tokens.begin() + 14), "First Citizen:");
}

}  // namespace
}  // namespace mixtrain
