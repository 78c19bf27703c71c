// Why: training corpora arrive as plain text (one token per byte, vocab 256)
// or as llm.c token files (a 1024-byte header of 256 little-endian int32,
// header[0] = 20240520, header[1] = 1, header[2] = token count, then that
// many little-endian uint16 tokens). This maps either read-only (no copy in
// process memory, token_corpus.h) with errors that name the file and
// exactly what is wrong with it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "engine/config/job_spec.h"
#include "engine/data/token_corpus.h"

namespace mixtrain {

inline constexpr int32_t kLlmcTokenFileMagic = 20240520;
inline constexpr int32_t kLlmcTokenFileVersion = 1;
inline constexpr int kLlmcHeaderInts = 256;
inline constexpr size_t kLlmcHeaderBytes = kLlmcHeaderInts * sizeof(int32_t);

// Maps the corpus at `path`, opened with open_input_file beneath
// `data_root` when one is given (common/contained_open.h). Throws
// EngineError(kInvalidArgument) naming the path when the file is missing,
// unreadable, outside the data root, a directory, empty, or (tokens
// format) has a bad magic, an unsupported version, or a token count that
// does not match the file size. Token values are not checked against any
// vocabulary here (see load_token_source). Memory: none counted; the file's
// pages are page cache while they are read (a text file is its own tokens,
// a token file's payload is read in place).
TokenCorpus load_token_file(const std::string& path, config::DataFormat format,
                            const std::optional<std::filesystem::path>& data_root = std::nullopt);

}  // namespace mixtrain
