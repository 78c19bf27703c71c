// Why: a job spec names its data as a file path or a built-in corpus
// ("builtin:demo"); this turns either into tokens that are known to fit
// the model's vocabulary, so no bad token reaches an embedding lookup.
// Files are mapped; a built-in corpus is generated into process memory,
// counted as host `data`, which the planner predicts with
// corpus_bytes_in_memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "engine/data/token_file.h"

namespace mixtrain {

// Loads `source` (a path, opened beneath `data_root` when one is given, or
// kDemoCorpusSource) as tokens: a file mapped (load_token_file), a built-in
// corpus in memory counted in `tracker` as host `data`. Built-in corpora
// are text: format must be kAuto or kText for them. Throws
// EngineError(kInvalidArgument) naming the source for any load_token_file
// error, an unknown "builtin:" name, or a token >= vocab_size (naming the
// first such token and its position); kOutOfMemory naming the data
// category when a built-in corpus passes the tracker's RAM limit.
// Requires 0 < vocab_size <= 65536.
TokenCorpus load_token_source(const std::string& source, config::DataFormat format,
                              int64_t vocab_size, MemoryTracker& tracker,
                              const std::optional<std::filesystem::path>& data_root = std::nullopt);

// The bytes load_token_source holds in process memory for `source`: a
// built-in corpus's size; 0 for a file, which is mapped.
int64_t corpus_bytes_in_memory(const std::string& source);

// Throws EngineError(kInvalidArgument) naming `source`, the first token
// >= vocab_size and its position, if there is one.
void check_tokens_fit_vocab(const TokenCorpus& tokens, int64_t vocab_size,
                            const std::string& source);

}  // namespace mixtrain
