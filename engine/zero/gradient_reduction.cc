// Why: see gradient_reduction.h.
#include "engine/zero/gradient_reduction.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <utility>
#include <vector>

#include "engine/common/error.h"
#include "engine/zero/reused_buffers.h"

namespace mixtrain {
namespace {

// Reductions started and not yet waited for, oldest first, each with what
// to do once it is done. Adding one waits for the oldest beyond two.
class InFlight {
 public:
  InFlight() = default;
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  ~InFlight() {
    try {
      for (const Op& op : ops_) op.handle.wait();
    } catch (const EngineError&) {
      // The ring already failed; the error reached whoever called the step.
    }
  }

  void add(CommHandle handle, std::function<void()> done = nullptr) {
    ops_.push_back({std::move(handle), std::move(done)});
    drain(kMaxInFlight);
  }
  // Waits until at most `keep` remain.
  void drain(size_t keep) {
    while (ops_.size() > keep) {
      Op op = std::move(ops_.front());
      ops_.pop_front();
      op.handle.wait();
      if (op.done) op.done();
    }
  }

 private:
  static constexpr size_t kMaxInFlight = 2;
  struct Op {
    CommHandle handle;
    std::function<void()> done;
  };
  std::deque<Op> ops_;
};

// fp32 buffers for gradients that cross the ranks widened (ZeroSettings::
// reduce_in_fp32); unused when they cross in their own dtype.
class Widening {
 public:
  Widening(const ZeroContext& context, bool on)
      : context_(context),
        on_(on),
        buffers_(context.backend, DType::kF32, MemoryCategory::kCommBuffers) {}
  bool on() const { return on_; }
  // An fp32 buffer of `numel` elements, contents undefined.
  Tensor take(int64_t numel) { return buffers_.take(numel); }
  // An fp32 copy of `grads`.
  Tensor copy_of(const Tensor& grads) {
    Tensor wide = buffers_.take(grads.numel());
    context_.backend.cast(wide, grads);
    return wide;
  }
  void give_back(Tensor buffer) { buffers_.give_back(std::move(buffer)); }

 private:
  const ZeroContext& context_;
  const bool on_;
  ReusedBuffers buffers_;
};

class BucketedAllReduce final : public GradientReduction {
 public:
  BucketedAllReduce(const ZeroContext& context, const PlacedTensor& grads, int64_t bucket_bytes,
                    bool widen)
      : context_(context),
        grads_(grads.tensor()),
        bucket_bytes_(bucket_bytes),
        wide_(context, widen) {}

  Tensor grad(const ParameterInfo& info) override { return parameter_view(grads_, info); }

  void end_unit(size_t unit_index, bool last_micro_batch) override {
    if (!last_micro_batch || context_.comm == nullptr) return;
    // Backward releases units from the end of the buffer to its start, so
    // the open bucket grows downwards and stays contiguous.
    const ParameterUnit& unit = context_.layout.units()[unit_index];
    if (begin_ == end_) end_ = unit.offset + unit.padded_numel;
    begin_ = unit.offset;
    const int64_t bytes = (end_ - begin_) * static_cast<int64_t>(dtype_size(grads_.dtype()));
    if (bytes >= bucket_bytes_ || unit_index == ParameterLayout::kEmbeddingsUnit) flush();
  }

  void finish() override {
    flush();
    in_flight_.drain(0);
  }

 private:
  // Submits the all-reduce of the open bucket, if any.
  void flush() {
    if (begin_ == end_) return;
    const Tensor bucket = grads_.view(begin_, {end_ - begin_});
    begin_ = end_ = 0;
    if (!wide_.on()) {
      in_flight_.add(
          context_.comm->all_reduce_async(bucket, ReduceOp::kSum, context_.inputs_ready()));
      return;
    }
    Tensor sum = wide_.copy_of(bucket);
    in_flight_.add(context_.comm->all_reduce_async(sum, ReduceOp::kSum, context_.inputs_ready()),
                   [this, bucket, sum]() mutable {
                     context_.backend.cast(bucket, sum);  // the one rounding of the sum
                     wide_.give_back(std::move(sum));
                   });
  }

  const ZeroContext& context_;
  const Tensor grads_;
  const int64_t bucket_bytes_;
  int64_t begin_ = 0, end_ = 0;  // the released units not yet submitted
  Widening wide_;
  InFlight in_flight_;
};

class InPlaceReduceScatter final : public GradientReduction {
 public:
  InPlaceReduceScatter(const ZeroContext& context, const PlacedTensor& grads, bool widen)
      : context_(context), grads_(grads), wide_(context, widen) {}

  Tensor grad(const ParameterInfo& info) override { return parameter_view(grads_.tensor(), info); }

  void end_unit(size_t unit_index, bool last_micro_batch) override {
    if (!last_micro_batch || context_.comm == nullptr) return;
    const ParameterUnit& unit = context_.layout.units()[unit_index];
    const Tensor unit_grads = grads_.tensor().view(unit.offset, {unit.padded_numel});
    const Tensor owned = grads_.at(context_.partition.shards()[unit_index]);
    if (!wide_.on()) {
      in_flight_.add(context_.comm->reduce_scatter_async(unit_grads, owned, ReduceOp::kSum,
                                                         context_.inputs_ready()));
      return;
    }
    Tensor send = wide_.copy_of(unit_grads);
    Tensor sum = wide_.take(owned.numel());
    in_flight_.add(
        context_.comm->reduce_scatter_async(send, sum, ReduceOp::kSum, context_.inputs_ready()),
        [this, owned, send, sum]() mutable {
          context_.backend.cast(owned, sum);  // the one rounding of the sum
          wide_.give_back(std::move(send));
          wide_.give_back(std::move(sum));
        });
  }

  void finish() override { in_flight_.drain(0); }

 private:
  const ZeroContext& context_;
  const PlacedTensor grads_;
  Widening wide_;
  InFlight in_flight_;
};

class ReduceScatterBuckets final : public GradientReduction {
 public:
  ReduceScatterBuckets(const ZeroContext& context, const PlacedTensor& grads, bool widen)
      : context_(context),
        grads_(grads),
        buffers_(context.backend, grads.tensor().dtype(), MemoryCategory::kCommBuffers),
        wide_(context, widen),
        buckets_(context.layout.units().size()) {
    buffers_.reserve(reduce_scatter_buffer_sizes(context.layout, context.partition));
  }

  Tensor grad(const ParameterInfo& info) override {
    return context_.unit_view(buckets_, info, "gradient bucket");
  }

  void begin_unit(size_t unit_index) override {
    Tensor& bucket = buckets_[unit_index];
    bucket = buffers_.take(context_.layout.units()[unit_index].padded_numel);
    context_.backend.set_zero(bucket);  // backward accumulates into it
  }

  void end_unit(size_t unit_index, bool /*last_micro_batch*/) override {
    const UnitShard& shard = context_.partition.shards()[unit_index];
    Tensor bucket = std::exchange(buckets_[unit_index], Tensor());
    if (wide_.on()) {
      Tensor send = wide_.copy_of(bucket);
      buffers_.give_back(std::move(bucket));  // its next user is ordered after the copy
      Tensor sum = wide_.take(shard.numel);
      in_flight_.add(
          context_.comm->reduce_scatter_async(send, sum, ReduceOp::kSum, context_.inputs_ready()),
          [this, &shard, send, sum]() mutable {
            Tensor reduced = buffers_.take(shard.numel);
            context_.backend.cast(reduced, sum);  // the one rounding of the sum
            add_to_owned(shard, std::move(reduced));
            wide_.give_back(std::move(send));
            wide_.give_back(std::move(sum));
          });
      return;
    }
    Tensor reduced = buffers_.take(shard.numel);
    CommHandle handle;
    if (context_.comm != nullptr) {
      handle = context_.comm->reduce_scatter_async(bucket, reduced, ReduceOp::kSum,
                                                   context_.inputs_ready());
    } else {
      context_.backend.copy(reduced, bucket);
    }
    in_flight_.add(std::move(handle), [this, &shard, bucket, reduced]() mutable {
      add_to_owned(shard, std::move(reduced));
      buffers_.give_back(std::move(bucket));
    });
  }

  void finish() override { in_flight_.drain(0); }

 private:
  // Adds `reduced` (grad dtype) into this rank's partition, then keeps it
  // for reuse.
  void add_to_owned(const UnitShard& shard, Tensor reduced) {
    const Tensor owned = grads_.at(shard);
    context_.backend.add(owned, owned, reduced);
    buffers_.give_back(std::move(reduced));
  }

  const ZeroContext& context_;
  const PlacedTensor grads_;
  ReusedBuffers buffers_;  // buckets and reduced chunks, grad dtype
  Widening wide_;
  std::vector<Tensor> buckets_;  // per unit, while backward adds into it
  InFlight in_flight_;
};

}  // namespace

ReductionStrategy reduction_strategy(const ZeroPlacement& placement) {
  if (placement.gradients.extent == Extent::kPartition)
    return ReductionStrategy::kReduceScatterBuckets;
  if (placement.optimizer.extent == Extent::kPartition)
    return ReductionStrategy::kInPlaceReduceScatter;
  return ReductionStrategy::kBucketedAllReduce;
}

std::vector<int64_t> reduce_scatter_buffer_sizes(const ParameterLayout& layout,
                                                 const ZeroPartition& partition) {
  const std::vector<ParameterUnit>& units = layout.units();
  const size_t embeddings = ParameterLayout::kEmbeddingsUnit;
  const size_t block = layout.block_unit(0);
  const size_t lnf = layout.lnf_unit();
  std::vector<int64_t> sizes = {units[embeddings].padded_numel, units[lnf].padded_numel};
  const int64_t blocks = std::min<int64_t>(3, layout.layers());
  for (int64_t i = 0; i < blocks; ++i) sizes.push_back(units[block].padded_numel);
  for (const size_t unit : {embeddings, block, lnf})
    sizes.push_back(partition.shards()[unit].numel);
  return sizes;
}

std::unique_ptr<GradientReduction> make_gradient_reduction(const ZeroContext& context,
                                                           const ZeroPlacement& placement,
                                                           const PlacedTensor& grads,
                                                           const ZeroSettings& settings) {
  const bool widen =
      settings.reduce_in_fp32 && context.comm != nullptr && grads.tensor().dtype() != DType::kF32;
  switch (reduction_strategy(placement)) {
    case ReductionStrategy::kReduceScatterBuckets:
      return std::make_unique<ReduceScatterBuckets>(context, grads, widen);
    case ReductionStrategy::kInPlaceReduceScatter:
      return std::make_unique<InPlaceReduceScatter>(context, grads, widen);
    case ReductionStrategy::kBucketedAllReduce:
      break;
  }
  return std::make_unique<BucketedAllReduce>(context, grads, settings.bucket_bytes, widen);
}

}  // namespace mixtrain
