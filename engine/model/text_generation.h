// Why: `mixtrain sample` turns a trained model back into text: autoregressive
// sampling from the softmax of the last position's logits, with the
// context cropped to the model's seq_len, reproducible from a seed.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/model.h"

namespace mixtrain {

struct GenerationOptions {
  int64_t new_tokens = 256;   // how many tokens to append
  float temperature = 1.0f;   // > 0; logits are divided by it
  int64_t top_k = 0;          // > 0: sample among the k likeliest only
  uint64_t seed = 1337;
};

// Appends options.new_tokens tokens to `prompt` (ids in [0, vocab); may be
// empty, then generation starts from token 0) with `model` on `params`, and
// returns the prompt followed by the new tokens. Throws
// EngineError(kInvalidArgument) for a bad option or id.
std::vector<int32_t> generate(Backend& backend, Model& model, const Tensor& params,
                              std::vector<int32_t> prompt, const GenerationOptions& options);

}  // namespace mixtrain
