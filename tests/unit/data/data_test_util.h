// Why: the data tests write their own corpora, well-formed and broken, into
// a private temporary folder; llm.c token files are assembled byte by byte
// from the format's spec so the loader is checked against the spec, not
// against itself. Error tests check the message says what is wrong.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "common/error.h"

namespace mixtrain::testing {

// A fresh folder under the system temp folder, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "mixtrain-data-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `bytes` to file `name` in this folder; returns its path.
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string path = (path_ / name).string();
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good()) << "writing " << path;
    return path;
  }

  std::string path(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void append_le32(std::string& out, int32_t value) {
  const auto bits = static_cast<uint32_t>(value);
  for (int shift = 0; shift < 32; shift += 8)
    out.push_back(static_cast<char>(bits >> shift & 0xFF));
}

// An llm.c token file: header[0..2] = magic, version, declared_count (the
// other 253 ints zero), then each token as little-endian uint16.
inline std::string llmc_token_file(const std::vector<uint16_t>& tokens, int32_t declared_count,
                                   int32_t magic = 20240520, int32_t version = 1) {
  std::string bytes;
  append_le32(bytes, magic);
  append_le32(bytes, version);
  append_le32(bytes, declared_count);
  bytes.resize(1024, '\0');
  for (uint16_t token : tokens) {
    bytes.push_back(static_cast<char>(token & 0xFF));
    bytes.push_back(static_cast<char>(token >> 8));
  }
  return bytes;
}

// A well-formed llm.c token file holding `tokens`.
inline std::string llmc_token_file(const std::vector<uint16_t>& tokens) {
  return llmc_token_file(tokens, static_cast<int32_t>(tokens.size()));
}

// Runs f, which must throw EngineError(kInvalidArgument) whose message
// contains every fragment.
template <class F>
::testing::AssertionResult throws_invalid_argument(F&& f,
                                                   std::initializer_list<std::string> fragments) {
  try {
    f();
  } catch (const EngineError& e) {
    if (e.code() != ErrorCode::kInvalidArgument) {
      return ::testing::AssertionFailure() << "wrong error code for: " << e.what();
    }
    for (const std::string& fragment : fragments) {
      if (std::string(e.what()).find(fragment) == std::string::npos) {
        return ::testing::AssertionFailure()
               << "message \"" << e.what() << "\" lacks \"" << fragment << "\"";
      }
    }
    return ::testing::AssertionSuccess() << e.what();
  }
  return ::testing::AssertionFailure() << "no EngineError thrown";
}

}  // namespace mixtrain::testing
