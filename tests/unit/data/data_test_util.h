// Why: the data tests write their own corpora, well-formed and broken, into
// a private temporary folder; llm.c token files are assembled byte by byte
// from the format's spec so the loader is checked against the spec, not
// against itself. Error tests check the message says what is wrong.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/data/token_file.h"
#include "test_support/engine_error.h"
#include "test_support/temp_dir.h"

namespace mixtrain::testing {

using test_support::TempDir;
using test_support::throws_invalid_argument;

// The tracker that counts the tests' in-memory corpora.
inline MemoryTracker& test_tracker() {
  static MemoryTracker tracker;
  return tracker;
}

// `tokens` as a uint16 corpus in memory (counted in test_tracker()).
inline TokenCorpus corpus_of(const std::vector<uint16_t>& tokens) {
  std::string bytes;
  for (uint16_t token : tokens) {
    bytes.push_back(static_cast<char>(token & 0xFF));
    bytes.push_back(static_cast<char>(token >> 8));
  }
  return TokenCorpus::in_memory(std::move(bytes), TokenCorpus::TokenWidth::kUint16, test_tracker());
}

// Every token of `corpus`, for comparisons.
inline std::vector<uint16_t> tokens_of(const TokenCorpus& corpus) {
  std::vector<uint16_t> tokens(corpus.size());
  for (size_t i = 0; i < corpus.size(); ++i) tokens[i] = corpus[i];
  return tokens;
}

// A corpus of n tokens where token i is i % 65521, so a window's content
// identifies its start.
inline std::shared_ptr<const TokenCorpus> counting_corpus(size_t n) {
  std::vector<uint16_t> tokens(n);
  for (size_t i = 0; i < n; ++i) tokens[i] = static_cast<uint16_t>(i % 65521);
  return std::make_shared<const TokenCorpus>(corpus_of(tokens));
}

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

}  // namespace mixtrain::testing
