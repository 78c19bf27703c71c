// Why: validation loss is only comparable between evaluations (and between
// runs) when every evaluation sees the same windows, so the evaluation set
// is a fixed, indexable stream over the validation tokens rather than a
// continuation of any training sampler.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/data/batch_sampler.h"

namespace mixtrain {

// Seed of every evaluation stream; fixed so that runs with different
// train.seed values are evaluated on the same windows.
inline constexpr uint64_t kEvalSeed = 0x6576616C5F736574ull;  // "eval_set"

class EvalBatchStream {
 public:
  // An evaluation set of `num_batches` batches over `val`. Uses the
  // micro_batch, seq_len, world_size and rank of `train_config` (its seed
  // and grad_accum do not apply): batch i is this rank's micro_batch-window
  // slice of global step i of a BatchSampler seeded with kEvalSeed. Throws
  // EngineError(kInvalidArgument) as BatchSampler does, or if num_batches < 1.
  EvalBatchStream(std::shared_ptr<const TokenCorpus> val, const SamplerConfig& train_config,
                  int64_t num_batches);

  int64_t num_batches() const { return num_batches_; }

  // This rank's batch `index` (0 <= index < num_batches(), else throws);
  // the same on every call.
  TokenBatch batch(int64_t index) const;

 private:
  BatchSampler sampler_;
  int64_t num_batches_;
};

}  // namespace mixtrain
