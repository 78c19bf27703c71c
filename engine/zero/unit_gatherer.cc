// Why: see unit_gatherer.h.
#include "engine/zero/unit_gatherer.h"

#include <algorithm>
#include <utility>

#include "engine/common/error.h"

namespace mixtrain {

std::vector<int64_t> gathered_buffer_sizes(const ParameterLayout& layout) {
  const std::vector<ParameterUnit>& units = layout.units();
  std::vector<int64_t> sizes = {units[ParameterLayout::kEmbeddingsUnit].padded_numel,
                                units[layout.lnf_unit()].padded_numel};
  const int64_t blocks = std::min<int64_t>(2, layout.layers());
  for (int64_t i = 0; i < blocks; ++i) sizes.push_back(units[layout.block_unit(0)].padded_numel);
  return sizes;
}

UnitGatherer::UnitGatherer(const ZeroContext& context, Tensor weights)
    : context_(context),
      weights_(std::move(weights)),
      buffers_(context.backend, weights_.dtype(), MemoryCategory::kGatheredParams),
      gathered_(context.layout.units().size()) {
  buffers_.reserve(gathered_buffer_sizes(context.layout));
}

UnitGatherer::~UnitGatherer() {
  try {
    if (prefetch_) prefetch_->handle.wait();
  } catch (const EngineError&) {
    // The ring already failed; the error reached whoever called the step.
  }
}

std::optional<size_t> UnitGatherer::next_unit(size_t unit, ModelPass pass) const {
  const size_t lnf = context_.layout.lnf_unit();
  if (pass == ModelPass::kForward) {  // embeddings, h.0 ... h.L-1, ln_f
    if (unit == lnf) return std::nullopt;
    return unit + 1;
  }
  // Backward: embeddings (head), ln_f, h.L-1 ... h.0.
  if (unit == ParameterLayout::kEmbeddingsUnit) return lnf;
  if (unit == context_.layout.block_unit(0)) return std::nullopt;
  return unit - 1;
}

void UnitGatherer::start_gather(size_t unit_index) {
  const ParameterUnit& unit = context_.layout.units()[unit_index];
  const UnitShard& shard = context_.partition.shards()[unit_index];
  if (prefetch_) buffers_.give_back(std::move(prefetch_->buffer));  // not acquired
  Tensor buffer = buffers_.take(unit.padded_numel);
  CommHandle handle =
      context_.all_gather(weights_.view(shard.partition_offset, {shard.numel}), buffer);
  prefetch_ = Prefetch{unit_index, std::move(buffer), std::move(handle)};
}

void UnitGatherer::acquire(size_t unit, ModelPass pass) {
  if (!prefetch_ || prefetch_->unit != unit) {
    if (prefetch_) prefetch_->handle.wait();  // a pass that stopped early
    start_gather(unit);
  }
  prefetch_->handle.wait();
  gathered_[unit] = std::move(prefetch_->buffer);
  prefetch_.reset();
  if (const std::optional<size_t> next = next_unit(unit, pass)) start_gather(*next);
}

void UnitGatherer::release(size_t unit) { buffers_.give_back(std::move(gathered_[unit])); }

Tensor UnitGatherer::param(const ParameterInfo& info) const {
  return context_.unit_view(gathered_, info, "weights");
}

}  // namespace mixtrain
