// Why: window drawing and slicing for batch_sampler.h. Each step reseeds a
// fresh mt19937_64 from splitmix64(seed, step), so resuming needs no RNG
// state beyond the step counter and the draws never depend on the rank.
#include "engine/data/batch_sampler.h"

#include <random>

#include "engine/common/error.h"
#include "engine/data/random.h"

namespace mixtrain {
namespace {

uint64_t step_seed(uint64_t seed, uint64_t step) { return splitmix64(splitmix64(seed) ^ step); }

}  // namespace

TokenBatch gather_windows(const TokenCorpus& tokens, const std::vector<int64_t>& starts,
                          int64_t seq_len) {
  TokenBatch batch;
  batch.batch_size = static_cast<int64_t>(starts.size());
  batch.seq_len = seq_len;
  batch.window_starts = starts;
  batch.inputs.resize(starts.size() * static_cast<size_t>(seq_len));
  batch.targets.resize(batch.inputs.size());
  const int64_t corpus = static_cast<int64_t>(tokens.size());
  for (size_t row = 0; row < starts.size(); ++row) {
    const int64_t start = starts[row];
    MIXTRAIN_CHECK_ARG(start >= 0 && start + seq_len + 1 <= corpus,
                       "window start " + std::to_string(start) + " with seq_len " +
                           std::to_string(seq_len) + " does not fit a corpus of " +
                           std::to_string(corpus) + " tokens");
    const auto first = static_cast<size_t>(start);
    const auto count = static_cast<size_t>(seq_len);
    tokens.copy_to(first, count, batch.inputs.data() + row * count);
    tokens.copy_to(first + 1, count, batch.targets.data() + row * count);
  }
  return batch;
}

BatchSampler::BatchSampler(std::shared_ptr<const TokenCorpus> tokens, const SamplerConfig& config)
    : tokens_(std::move(tokens)), config_(config) {
  MIXTRAIN_CHECK_ARG(tokens_ != nullptr, "BatchSampler: no token buffer");
  MIXTRAIN_CHECK_ARG(config.micro_batch >= 1 && config.seq_len >= 1 && config.grad_accum >= 1 &&
                         config.world_size >= 1,
                     "BatchSampler: micro_batch " + std::to_string(config.micro_batch) +
                         ", seq_len " + std::to_string(config.seq_len) + ", grad_accum " +
                         std::to_string(config.grad_accum) + " and world_size " +
                         std::to_string(config.world_size) + " must all be at least 1");
  MIXTRAIN_CHECK_ARG(config.rank >= 0 && config.rank < config.world_size,
                     "BatchSampler: rank " + std::to_string(config.rank) +
                         " is outside world size " + std::to_string(config.world_size));
  MIXTRAIN_CHECK_ARG(
      static_cast<int64_t>(tokens_->size()) >= config.seq_len + 1,
      "BatchSampler: a corpus of " + std::to_string(tokens_->size()) +
          " tokens is shorter than seq_len + 1 = " + std::to_string(config.seq_len + 1));
}

int64_t BatchSampler::global_windows_per_step() const {
  return config_.micro_batch * config_.grad_accum * config_.world_size;
}

std::vector<int64_t> BatchSampler::global_window_starts(uint64_t step) const {
  const uint64_t start_count = tokens_->size() - static_cast<uint64_t>(config_.seq_len);
  std::mt19937_64 rng(step_seed(config_.seed, step));
  std::vector<int64_t> starts(static_cast<size_t>(global_windows_per_step()));
  for (int64_t& start : starts) start = static_cast<int64_t>(uniform_below(rng, start_count));
  return starts;
}

std::vector<TokenBatch> BatchSampler::step_batches(uint64_t step) const {
  const std::vector<int64_t> global = global_window_starts(step);
  std::vector<TokenBatch> micro_batches;
  micro_batches.reserve(static_cast<size_t>(config_.grad_accum));
  for (int64_t micro = 0; micro < config_.grad_accum; ++micro) {
    const auto first =
        global.begin() + (micro * config_.world_size + config_.rank) * config_.micro_batch;
    const std::vector<int64_t> starts(first, first + config_.micro_batch);
    micro_batches.push_back(gather_windows(*tokens_, starts, config_.seq_len));
  }
  return micro_batches;
}

std::vector<TokenBatch> BatchSampler::next_step() { return step_batches(next_step_++); }

void BatchSampler::restore(const SamplerState& state) {
  MIXTRAIN_CHECK_ARG(state.seed == config_.seed,
                     "BatchSampler: checkpoint sampler seed " + std::to_string(state.seed) +
                         " differs from the configured seed " + std::to_string(config_.seed) +
                         "; resumed batches would not match");
  next_step_ = state.next_step;
}

}  // namespace mixtrain
