// Why: validation of the data section's shape (one val source, a sane
// fraction, parts long enough for one window) in one place.
#include "engine/data/train_val_split.h"

#include <cmath>
#include <sstream>

#include "engine/common/error.h"
#include "engine/data/token_source.h"

namespace mixtrain {
namespace {

void check_holds_a_window(size_t tokens, int64_t seq_len, const std::string& what) {
  MIXTRAIN_CHECK_ARG(static_cast<int64_t>(tokens) >= seq_len + 1,
                     what + " holds " + std::to_string(tokens) +
                         " tokens, fewer than seq_len + 1 = " + std::to_string(seq_len + 1) +
                         " (one training window)");
}

// "0.1" rather than std::to_string's "0.100000".
std::string format_fraction(double fraction) {
  std::ostringstream out;
  out << fraction;
  return out.str();
}

}  // namespace

TrainValTokens split_train_val(const TokenCorpus& tokens, double val_fraction, int64_t seq_len,
                               const std::string& source) {
  MIXTRAIN_CHECK_ARG(seq_len >= 1, "seq_len " + std::to_string(seq_len) + " must be at least 1");
  MIXTRAIN_CHECK_ARG(
      val_fraction > 0.0 && val_fraction < 1.0,
      "val_fraction " + format_fraction(val_fraction) + " must lie strictly between 0 and 1");
  const size_t val_count =
      static_cast<size_t>(std::floor(static_cast<double>(tokens.size()) * val_fraction));
  const size_t train_count = tokens.size() - val_count;
  const std::string split = "with val_fraction " + format_fraction(val_fraction) + ", the ";
  check_holds_a_window(train_count, seq_len, split + "training part of '" + source + "'");
  check_holds_a_window(val_count, seq_len, split + "validation part of '" + source + "'");
  return {std::make_shared<const TokenCorpus>(tokens.slice(0, train_count)),
          std::make_shared<const TokenCorpus>(tokens.slice(train_count, val_count))};
}

TrainValTokens load_train_val(const config::DataSpec& spec, int64_t vocab_size, int64_t seq_len,
                              MemoryTracker& tracker,
                              const std::optional<std::filesystem::path>& data_root) {
  MIXTRAIN_CHECK_ARG(seq_len >= 1, "seq_len " + std::to_string(seq_len) + " must be at least 1");
  MIXTRAIN_CHECK_ARG(!spec.train.empty(), "data.train is required");
  MIXTRAIN_CHECK_ARG(!spec.val || !spec.val_fraction,
                     "give data.val or data.val_fraction, not both");
  TokenCorpus train = load_token_source(spec.train, spec.format, vocab_size, tracker, data_root);
  if (!spec.val) {
    return split_train_val(train, config::effective_val_fraction(spec), seq_len, spec.train);
  }
  check_holds_a_window(train.size(), seq_len, "data source '" + spec.train + "'");
  TokenCorpus val = load_token_source(*spec.val, spec.format, vocab_size, tracker, data_root);
  check_holds_a_window(val.size(), seq_len, "data source '" + *spec.val + "'");
  return {std::make_shared<const TokenCorpus>(std::move(train)),
          std::make_shared<const TokenCorpus>(std::move(val))};
}

int64_t data_bytes_in_memory(const config::DataSpec& spec) {
  return corpus_bytes_in_memory(spec.train) + (spec.val ? corpus_bytes_in_memory(*spec.val) : 0);
}

}  // namespace mixtrain
