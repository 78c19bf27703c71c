// Why: the sampling loop behind `mixtrain sample` (see text_generation.h).
#include "engine/model/text_generation.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>

namespace mixtrain {
namespace {

// A uniform double in [0, 1) from the top 53 bits of the generator (not
// std::uniform_real_distribution, whose output differs between libraries).
double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
}

// Draws an index from softmax(logits / temperature), restricted to the
// top_k largest logits when top_k > 0.
int32_t sample_token(const std::vector<float>& logits, const GenerationOptions& options,
                     std::mt19937_64& rng) {
  std::vector<int32_t> candidates(logits.size());
  std::iota(candidates.begin(), candidates.end(), 0);
  if (options.top_k > 0 && options.top_k < static_cast<int64_t>(logits.size())) {
    std::partial_sort(candidates.begin(), candidates.begin() + options.top_k, candidates.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    candidates.resize(static_cast<size_t>(options.top_k));
  }
  float max_logit = -INFINITY;
  for (int32_t c : candidates) max_logit = std::max(max_logit, logits[c]);
  std::vector<double> weights(candidates.size());
  double total = 0.0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    weights[i] = std::exp((logits[candidates[i]] - max_logit) / options.temperature);
    total += weights[i];
  }
  double draw = uniform01(rng) * total;
  for (size_t i = 0; i < candidates.size(); ++i) {
    draw -= weights[i];
    if (draw < 0.0) return candidates[i];
  }
  return candidates.back();
}

}  // namespace

std::vector<int32_t> generate(Backend& backend, Model& model, const Tensor& params,
                              std::vector<int32_t> prompt, const GenerationOptions& options) {
  const GptConfig& config = model.config();
  MIXTRAIN_CHECK_ARG(options.new_tokens >= 0, "generate: tokens must be >= 0, got " +
                                                  std::to_string(options.new_tokens));
  MIXTRAIN_CHECK_ARG(options.temperature > 0.0f && std::isfinite(options.temperature),
                     "generate: temperature must be > 0, got " +
                         std::to_string(options.temperature));
  MIXTRAIN_CHECK_ARG(options.top_k >= 0,
                     "generate: top_k must be >= 0, got " + std::to_string(options.top_k));
  for (int32_t id : prompt) {
    MIXTRAIN_CHECK_ARG(id >= 0 && id < config.vocab,
                       "generate: prompt token " + std::to_string(id) + " is outside the vocab " +
                           std::to_string(config.vocab));
  }
  if (prompt.empty()) prompt.push_back(0);
  std::mt19937_64 rng(options.seed);
  std::vector<float> last(static_cast<size_t>(config.vocab));
  for (int64_t n = 0; n < options.new_tokens; ++n) {
    const int64_t context = std::min<int64_t>(static_cast<int64_t>(prompt.size()), config.seq_len);
    const Tensor tokens =
        backend.empty({1, context}, DType::kI32, MemoryCategory::kActivations, MemoryPool::kHost);
    backend.copy_from_host(tokens, prompt.data() + (prompt.size() - static_cast<size_t>(context)));
    model.forward(params, tokens);
    const Tensor logits = model.logits();
    const Tensor row = logits.view((context - 1) * config.padded_vocab(), {config.vocab});
    const Tensor row_f32 = backend.empty({config.vocab}, DType::kF32, MemoryCategory::kWorkspace);
    backend.cast(row_f32, row);
    backend.copy_to_host(last.data(), row_f32);
    prompt.push_back(sample_token(last, options, rng));
  }
  return prompt;
}

}  // namespace mixtrain
