// Why: training batches must be reproducible (same seed, same batches),
// resumable from a checkpoint, and the same global data whatever the number
// of ranks. Every step's windows are drawn from an RNG seeded from
// (seed, step) alone, so the sampler's whole position is two integers and
// any rank can compute any step without talking to the others.
//
// Layout of one step: the global batch is micro_batch * grad_accum *
// world_size windows, drawn in order. Micro-step m of rank r takes windows
// [(m * world_size + r) * micro_batch, ... + micro_batch). A run with W
// ranks and one with W' ranks but the same global batch size therefore
// train on exactly the same windows each step.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/data/token_file.h"

namespace mixtrain {

// Shape of the data one rank consumes per step.
struct SamplerConfig {
  int64_t micro_batch = 1;  // B: windows per micro-batch per rank
  int64_t seq_len = 1;      // T: tokens per window (targets need T + 1)
  int64_t grad_accum = 1;   // micro-batches per step per rank
  int64_t world_size = 1;   // W: data-parallel ranks
  int64_t rank = 0;         // this rank, 0 <= rank < world_size
  uint64_t seed = 0;        // train.seed
};

// One micro-batch, row-major (B,T) host arrays: targets[b][t] is the token
// after inputs[b][t] in the corpus.
struct TokenBatch {
  int64_t batch_size = 0;              // B
  int64_t seq_len = 0;                 // T
  std::vector<int32_t> inputs;         // (B,T)
  std::vector<int32_t> targets;        // (B,T)
  std::vector<int64_t> window_starts;  // (B): corpus offset of each row's first input token
};

// The sampler's position, for checkpoints: restoring it makes the sampler
// draw exactly the batches it would have drawn next.
struct SamplerState {
  uint64_t seed = 0;       // must equal the sampler's configured seed
  uint64_t next_step = 0;  // global step whose windows next_step() returns next
};

// Copies the (T + 1)-token windows at `starts` out of `tokens` into a batch.
// Requires every start + seq_len + 1 <= tokens.size() (throws otherwise).
TokenBatch gather_windows(const TokenCorpus& tokens, const std::vector<int64_t>& starts,
                          int64_t seq_len);

class BatchSampler {
 public:
  // Throws EngineError(kInvalidArgument) if `tokens` is null or holds fewer
  // than seq_len + 1 tokens, or if a config field is out of range
  // (micro_batch, seq_len, grad_accum, world_size >= 1; 0 <= rank < world_size).
  BatchSampler(std::shared_ptr<const TokenCorpus> tokens, const SamplerConfig& config);

  // The micro_batch * grad_accum * world_size window starts of global step
  // `step`, in draw order, each uniform in [0, tokens - seq_len - 1]. Pure:
  // depends only on the seed, the step, the corpus size and the global batch size.
  std::vector<int64_t> global_window_starts(uint64_t step) const;

  // This rank's grad_accum micro-batches (each (B,T)) of global step
  // `step`, in micro-step order. Pure.
  std::vector<TokenBatch> step_batches(uint64_t step) const;

  // step_batches() of the next step; then advances to the following step.
  std::vector<TokenBatch> next_step();

  // The current position (seed and next step).
  SamplerState state() const { return {config_.seed, next_step_}; }

  // Continues from `state`. Throws EngineError(kInvalidArgument) when its
  // seed differs from the configured seed (the batches would not match).
  void restore(const SamplerState& state);

  const SamplerConfig& config() const { return config_; }
  // micro_batch * grad_accum * world_size.
  int64_t global_windows_per_step() const;

 private:
  std::shared_ptr<const TokenCorpus> tokens_;
  SamplerConfig config_;
  uint64_t next_step_ = 0;
};

}  // namespace mixtrain
