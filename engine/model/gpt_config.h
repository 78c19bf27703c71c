// Why: the five numbers that fix a GPT-2's shapes, checked once where a
// model is built so that every later shape computation can trust them.
#pragma once

#include <cstdint>

#include "engine/config/job_spec.h"

namespace mixtrain {

struct GptConfig {
  int64_t layers = 0;   // transformer blocks (L)
  int64_t heads = 0;    // attention heads per block (NH)
  int64_t dim = 0;      // channels of the residual stream (C)
  int64_t seq_len = 0;  // longest sequence; rows of the position embedding (T max)
  int64_t vocab = 0;    // token ids are in [0, vocab) (V)

  // The output GEMM's vocabulary is padded to a multiple of this (Vp), as
  // llm.c pads 50257 to 50304: its rows then stay 16-byte aligned and the
  // GEMM tiles whole. The padding rows of wte are zero and the loss masks
  // their logits, so they change nothing the model computes.
  static constexpr int64_t kVocabMultiple = 64;

  // Throws EngineError(kInvalidArgument) naming the first bad field: every
  // field must be positive and `heads` must divide `dim`.
  void validate() const;
  // dim / heads.
  int64_t head_size() const { return dim / heads; }
  // vocab rounded up to kVocabMultiple (Vp): the logits' row length.
  int64_t padded_vocab() const {
    return (vocab + kVocabMultiple - 1) / kVocabMultiple * kVocabMultiple;
  }
};

// The shape a job spec's `model` asks for (not validated here).
inline GptConfig gpt_config(const config::ModelSpec& model) {
  return GptConfig{model.layers, model.heads, model.dim, model.seq_len, model.vocab};
}

}  // namespace mixtrain
