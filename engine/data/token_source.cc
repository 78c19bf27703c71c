// Why: resolution of built-in names versus paths, and the vocabulary check
// that every corpus passes before training sees it.
#include "engine/data/token_source.h"

#include <algorithm>

#include "engine/common/error.h"
#include "engine/data/demo_corpus.h"

namespace mixtrain {
namespace {

constexpr std::string_view kBuiltinPrefix = "builtin:";

TokenBuffer load_builtin(const std::string& source, config::DataFormat format) {
  MIXTRAIN_CHECK_ARG(source == kDemoCorpusSource,
                     "unknown built-in data source '" + source +
                         "' (known: " + std::string(kDemoCorpusSource) + ")");
  MIXTRAIN_CHECK_ARG(format != config::DataFormat::kTokens,
                     "data source '" + source + "' is text; format tokens does not apply to it");
  const std::string text = generate_demo_corpus(kDemoCorpusSeed);
  return TokenBuffer(text.begin(), text.end());
}

}  // namespace

void check_tokens_fit_vocab(const TokenBuffer& tokens, int64_t vocab_size,
                            const std::string& source) {
  const auto bad = std::find_if(tokens.begin(), tokens.end(),
                                [vocab_size](uint16_t token) { return token >= vocab_size; });
  MIXTRAIN_CHECK_ARG(bad == tokens.end(),
                     "data source '" + source + "': token " + std::to_string(*bad) +
                         " at position " + std::to_string(bad - tokens.begin()) +
                         " is outside the model vocabulary (vocab " + std::to_string(vocab_size) +
                         ", tokens must be < vocab)");
}

TokenBuffer load_token_source(const std::string& source, config::DataFormat format,
                              int64_t vocab_size,
                              const std::optional<std::filesystem::path>& data_root) {
  MIXTRAIN_CHECK_ARG(vocab_size > 0 && vocab_size <= 65536,
                     "model vocab " + std::to_string(vocab_size) +
                         " is outside 1..65536 (tokens are stored as uint16)");
  TokenBuffer tokens = source.starts_with(kBuiltinPrefix)
                           ? load_builtin(source, format)
                           : load_token_file(source, format, data_root);
  check_tokens_fit_vocab(tokens, vocab_size, source);
  return tokens;
}

}  // namespace mixtrain
