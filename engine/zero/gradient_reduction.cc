// Why: see gradient_reduction.h.
#include "engine/zero/gradient_reduction.h"

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

class BucketedAllReduce final : public GradientReduction {
 public:
  BucketedAllReduce(const ZeroContext& context, const PlacedTensor& grads, int64_t bucket_bytes)
      : context_(context), grads_(grads.tensor()), bucket_bytes_(bucket_bytes) {}

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
    in_flight_.add(context_.comm->all_reduce_async(grads_.view(begin_, {end_ - begin_}),
                                                   ReduceOp::kSum, context_.inputs_ready()));
    begin_ = end_ = 0;
  }

  const ZeroContext& context_;
  const Tensor grads_;
  const int64_t bucket_bytes_;
  int64_t begin_ = 0, end_ = 0;  // the released units not yet submitted
  InFlight in_flight_;
};

class InPlaceReduceScatter final : public GradientReduction {
 public:
  InPlaceReduceScatter(const ZeroContext& context, const PlacedTensor& grads)
      : context_(context), grads_(grads) {}

  Tensor grad(const ParameterInfo& info) override { return parameter_view(grads_.tensor(), info); }

  void end_unit(size_t unit_index, bool last_micro_batch) override {
    if (!last_micro_batch || context_.comm == nullptr) return;
    const ParameterUnit& unit = context_.layout.units()[unit_index];
    in_flight_.add(
        context_.comm->reduce_scatter_async(grads_.tensor().view(unit.offset, {unit.padded_numel}),
                                            grads_.at(context_.partition.shards()[unit_index]),
                                            ReduceOp::kSum, context_.inputs_ready()));
  }

  void finish() override { in_flight_.drain(0); }

 private:
  const ZeroContext& context_;
  const PlacedTensor grads_;
  InFlight in_flight_;
};

class ReduceScatterBuckets final : public GradientReduction {
 public:
  ReduceScatterBuckets(const ZeroContext& context, const PlacedTensor& grads)
      : context_(context),
        grads_(grads),
        buffers_(context.backend, grads.tensor().dtype(), MemoryCategory::kCommBuffers),
        buckets_(context.layout.units().size()) {}

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
    Tensor reduced = buffers_.take(shard.numel);
    CommHandle handle;
    if (context_.comm != nullptr) {
      handle = context_.comm->reduce_scatter_async(bucket, reduced, ReduceOp::kSum,
                                                   context_.inputs_ready());
    } else {
      context_.backend.copy(reduced, bucket);
    }
    in_flight_.add(std::move(handle), [this, &shard, bucket, reduced]() mutable {
      const Tensor owned = grads_.at(shard);
      context_.backend.add(owned, owned, reduced);
      buffers_.give_back(std::move(bucket));
      buffers_.give_back(std::move(reduced));
    });
  }

  void finish() override { in_flight_.drain(0); }

 private:
  const ZeroContext& context_;
  const PlacedTensor grads_;
  ReusedBuffers buffers_;        // buckets and reduced chunks
  std::vector<Tensor> buckets_;  // per unit, while backward adds into it
  InFlight in_flight_;
};

}  // namespace

std::unique_ptr<GradientReduction> make_gradient_reduction(const ZeroContext& context,
                                                           const ZeroPlacement& placement,
                                                           const PlacedTensor& grads,
                                                           int64_t bucket_bytes) {
  if (placement.gradients.extent == Extent::kPartition)
    return std::make_unique<ReduceScatterBuckets>(context, grads);
  if (placement.optimizer.extent == Extent::kPartition)
    return std::make_unique<InPlaceReduceScatter>(context, grads);
  return std::make_unique<BucketedAllReduce>(context, grads, bucket_bytes);
}

}  // namespace mixtrain
