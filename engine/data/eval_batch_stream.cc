// Why: the evaluation set as a BatchSampler with a fixed seed and one
// micro-batch per step, read by index so no evaluation disturbs another.
#include "engine/data/eval_batch_stream.h"

#include "engine/common/error.h"

namespace mixtrain {
namespace {

SamplerConfig eval_config(const SamplerConfig& train_config) {
  SamplerConfig config = train_config;
  config.grad_accum = 1;
  config.seed = kEvalSeed;
  return config;
}

}  // namespace

EvalBatchStream::EvalBatchStream(std::shared_ptr<const TokenCorpus> val,
                                 const SamplerConfig& train_config, int64_t num_batches)
    : sampler_(std::move(val), eval_config(train_config)), num_batches_(num_batches) {
  MIXTRAIN_CHECK_ARG(num_batches >= 1,
                     "eval_batches " + std::to_string(num_batches) + " must be at least 1");
}

TokenBatch EvalBatchStream::batch(int64_t index) const {
  MIXTRAIN_CHECK_ARG(
      index >= 0 && index < num_batches_,
      "eval batch " + std::to_string(index) + " is outside 0.." + std::to_string(num_batches_ - 1));
  return sampler_.step_batches(static_cast<uint64_t>(index)).front();
}

}  // namespace mixtrain
