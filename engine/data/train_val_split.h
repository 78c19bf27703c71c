// Why: the job spec's `data` section gives the validation set either as a
// separate file or as the last fraction of the training corpus; this loads
// both parts once, checks that each can hold a (seq_len + 1)-token window,
// and hands them out as shared read-only corpora for samplers to share (a
// split is two slices of one corpus: nothing is copied).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "engine/config/job_spec.h"
#include "engine/data/token_file.h"

namespace mixtrain {

// Training and validation tokens.
struct TrainValTokens {
  std::shared_ptr<const TokenCorpus> train;
  std::shared_ptr<const TokenCorpus> val;
};

// Splits `tokens` (loaded from `source`) so that the last
// floor(size * val_fraction) tokens become val and the rest train. Throws
// EngineError(kInvalidArgument) naming `source` unless 0 < val_fraction < 1
// and both parts hold at least seq_len + 1 tokens.
TrainValTokens split_train_val(const TokenCorpus& tokens, double val_fraction, int64_t seq_len,
                               const std::string& source);

// Loads the job spec's `data` section with load_token_source (files opened
// beneath `data_root` when one is given, built-in corpora counted in
// `tracker`): train and the separate val file,
// or train split by effective_val_fraction (0.1 when neither is given).
// Throws EngineError(kInvalidArgument) for any loading error, when both val
// and val_fraction are given, when val_fraction is outside (0, 1), or when
// a part holds fewer than seq_len + 1 tokens (naming the source), and
// kOutOfMemory as load_token_source. Requires seq_len >= 1.
TrainValTokens load_train_val(const config::DataSpec& spec, int64_t vocab_size, int64_t seq_len,
                              MemoryTracker& tracker,
                              const std::optional<std::filesystem::path>& data_root = std::nullopt);

// The bytes load_train_val holds in process memory for `spec` (host `data`:
// corpus_bytes_in_memory of train and val), for the planner.
int64_t data_bytes_in_memory(const config::DataSpec& spec);

}  // namespace mixtrain
