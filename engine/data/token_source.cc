// Why: resolution of built-in names versus paths, and the vocabulary check
// that every corpus passes before training sees it.
#include "engine/data/token_source.h"

#include "engine/common/error.h"
#include "engine/data/demo_corpus.h"

namespace mixtrain {
namespace {

constexpr std::string_view kBuiltinPrefix = "builtin:";

bool is_builtin(const std::string& source) { return source.starts_with(kBuiltinPrefix); }

void check_builtin_name(const std::string& source) {
  MIXTRAIN_CHECK_ARG(source == kDemoCorpusSource,
                     "unknown built-in data source '" + source +
                         "' (known: " + std::string(kDemoCorpusSource) + ")");
}

TokenCorpus load_builtin(const std::string& source, config::DataFormat format,
                         MemoryTracker& tracker) {
  check_builtin_name(source);
  MIXTRAIN_CHECK_ARG(format != config::DataFormat::kTokens,
                     "data source '" + source + "' is text; format tokens does not apply to it");
  return TokenCorpus::in_memory(generate_demo_corpus(kDemoCorpusSeed),
                                TokenCorpus::TokenWidth::kByte, tracker);
}

}  // namespace

void check_tokens_fit_vocab(const TokenCorpus& tokens, int64_t vocab_size,
                            const std::string& source) {
  // Every token of its width fits: nothing to read.
  if (vocab_size > (tokens.width() == TokenCorpus::TokenWidth::kByte ? 255 : 65535)) return;
  for (size_t i = 0; i < tokens.size(); ++i) {
    MIXTRAIN_CHECK_ARG(tokens[i] < vocab_size,
                       "data source '" + source + "': token " + std::to_string(tokens[i]) +
                           " at position " + std::to_string(i) +
                           " is outside the model vocabulary (vocab " + std::to_string(vocab_size) +
                           ", tokens must be < vocab)");
  }
}

int64_t corpus_bytes_in_memory(const std::string& source) {
  if (!is_builtin(source)) return 0;
  check_builtin_name(source);
  static const int64_t demo_bytes =
      static_cast<int64_t>(generate_demo_corpus(kDemoCorpusSeed).size());
  return demo_bytes;
}

TokenCorpus load_token_source(const std::string& source, config::DataFormat format,
                              int64_t vocab_size, MemoryTracker& tracker,
                              const std::optional<std::filesystem::path>& data_root) {
  MIXTRAIN_CHECK_ARG(vocab_size > 0 && vocab_size <= 65536,
                     "model vocab " + std::to_string(vocab_size) +
                         " is outside 1..65536 (tokens are stored as uint16)");
  TokenCorpus tokens = is_builtin(source) ? load_builtin(source, format, tracker)
                                          : load_token_file(source, format, data_root);
  check_tokens_fit_vocab(tokens, vocab_size, source);
  return tokens;
}

}  // namespace mixtrain
