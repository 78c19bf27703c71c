// Why: the stage-dependent placement of the model state and the step
// stages over it (see zero_engine.h for the table).
#include "engine/zero/zero_engine.h"

#include <cmath>
#include <string>
#include <utility>

#include "engine/common/error.h"

namespace mixtrain {

// The GptWeights of the engine: forwards acquire/release to it and hands
// out views of the full buffers, the gathered units or the buckets.
class ZeroEngine::Weights final : public GptWeights {
 public:
  explicit Weights(ZeroEngine& engine) : engine_(engine) {}
  void set_reduce(bool reduce) { reduce_ = reduce; }

  void acquire(size_t unit, GptPass pass) override { engine_.on_acquire(unit, pass); }
  void release(size_t unit, GptPass pass) override { engine_.on_release(unit, pass, reduce_); }
  Tensor param(const ParameterInfo& info) override {
    if (engine_.settings_.stage < 3) return parameter_view(engine_.params_, info);
    return unit_view(engine_.gathered_, info, "weights");
  }
  Tensor grad(const ParameterInfo& info) override {
    if (engine_.settings_.stage < 2) return parameter_view(engine_.grads_, info);
    return unit_view(engine_.buckets_, info, "gradient bucket");
  }

 private:
  Tensor unit_view(const std::vector<Tensor>& per_unit, const ParameterInfo& info,
                   const char* what) const {
    const Tensor& buffer = per_unit[info.unit];
    if (!buffer.defined())
      throw EngineError(ErrorCode::kInternal, "ZeroEngine: " + info.name + " used while its " +
                                                  std::string(what) + " is not acquired");
    return buffer.view(info.offset - engine_.layout_.units()[info.unit].offset, info.shape);
  }

  ZeroEngine& engine_;
  bool reduce_ = false;
};

namespace {

ZeroSettings checked(ZeroSettings settings, const Backend& backend, const Communicator* comm) {
  MIXTRAIN_CHECK_ARG(settings.stage >= 0 && settings.stage <= 3,
                     "zero.stage must be 0, 1, 2 or 3, got " + std::to_string(settings.stage));
  MIXTRAIN_CHECK_ARG(!settings.offload_params || settings.stage == 3,
                     "zero.offload_params: cpu needs zero.stage 3 (only stage 3 partitions the "
                     "weights), got stage " +
                         std::to_string(settings.stage));
  MIXTRAIN_CHECK_ARG(comm == nullptr || comm->device_type() == backend.device_type(),
                     std::string("ZeroEngine: the ") + comm->backend_name() +
                         " communicator does not reach the " + backend.name() + " backend");
  return settings;
}

}  // namespace

ZeroEngine::ZeroEngine(Backend& backend, const Gpt& gpt, Communicator* comm, ZeroSettings settings)
    : backend_(backend),
      layout_(gpt.layout()),
      comm_(comm),
      settings_(checked(settings, backend, comm)),
      world_size_(comm ? comm->world_size() : 1),
      compute_dtype_(gpt.compute_dtype()),
      grad_dtype_(gpt.grad_dtype()),
      partition_(layout_, comm ? comm->rank() : 0, world_size_),
      optimizer_partition_(settings_.stage == 0 ? ZeroPartition(layout_, 0, 1) : partition_),
      gathered_buffers_(backend, compute_dtype_, MemoryCategory::kGatheredParams),
      reduce_buffers_(backend, grad_dtype_, MemoryCategory::kCommBuffers),
      gathered_(layout_.units().size()),
      buckets_(layout_.units().size()),
      weights_(std::make_unique<Weights>(*this)) {
  const int64_t owned = optimizer_partition_.numel();
  const bool host = settings_.offload_optimizer;
  master_ = allocate(owned, DType::kF32, MemoryCategory::kMasterParams, host);
  adam_m_ = allocate(owned, DType::kF32, MemoryCategory::kOptimizerState, host);
  adam_v_ = allocate(owned, DType::kF32, MemoryCategory::kOptimizerState, host);
  const bool share_master =
      settings_.stage == 0 && compute_dtype_ == DType::kF32 && !settings_.offload_optimizer;
  if (share_master) {
    params_ = master_;
  } else if (settings_.stage < 3) {
    params_ = allocate(layout_.numel(), compute_dtype_, MemoryCategory::kParams);
  } else {
    params_ = allocate(partition_.numel(), compute_dtype_, MemoryCategory::kParams,
                       settings_.offload_params);
  }
  grads_ = allocate(settings_.stage < 2 ? layout_.numel() : partition_.numel(), grad_dtype_,
                    MemoryCategory::kGrads);
  const std::vector<PartitionSegment>& segments = optimizer_partition_.segments();
  size_t first = 0;
  for (const UnitShard& shard : optimizer_partition_.shards()) {
    size_t end = first;
    while (end < segments.size() &&
           segments[end].partition_offset < shard.partition_offset + shard.numel)
      ++end;
    unit_segments_.emplace_back(first, end);
    first = end;
  }
  if (settings_.offload_optimizer) {
    host_ops_ = make_backend("cpu");
    host_grads_ = allocate(owned, grad_dtype_, MemoryCategory::kCommBuffers, /*host=*/true);
    host_weights_ = allocate(owned, compute_dtype_, MemoryCategory::kCommBuffers, /*host=*/true);
  }
}

ZeroEngine::~ZeroEngine() {
  try {
    if (prefetch_) prefetch_->handle.wait();
    drain(0);
  } catch (const EngineError&) {
    // The ring already failed; the error reached whoever called the step.
  }
}

Tensor ZeroEngine::reachable(const Tensor& chunk) {
  if (backend_.device_type() == DeviceType::kCpu || chunk.pool() == MemoryPool::kDevice)
    return chunk;
  Tensor copy = allocate(chunk.numel(), chunk.dtype(), MemoryCategory::kCommBuffers);
  backend_.copy(copy, chunk);
  return copy;
}

ReadyEvent ZeroEngine::inputs_ready() {
  // A GPU backend's ops run asynchronously on its compute stream; the
  // communicator reads and writes the buffers from its own stream, which
  // waits for everything enqueued so far (the outputs' allocations too).
  if (backend_.device_type() == DeviceType::kCpu) return nullptr;
  return backend_.record_event(StreamKind::kCompute);
}

Tensor ZeroEngine::allocate(int64_t numel, DType dtype, MemoryCategory category, bool host) {
  return backend_.zeros({numel}, dtype, category, host ? MemoryPool::kHost : MemoryPool::kDevice);
}

const Tensor& ZeroEngine::state_tensor(State which) const {
  return which == State::kMaster ? master_ : which == State::kAdamM ? adam_m_ : adam_v_;
}

void ZeroEngine::load(State which, std::span<const float> full) {
  MIXTRAIN_CHECK_ARG(static_cast<int64_t>(full.size()) == layout_.numel(),
                     "ZeroEngine::load: got " + std::to_string(full.size()) +
                         " values, the layout has " + std::to_string(layout_.numel()));
  const Tensor& tensor = state_tensor(which);
  for (const UnitShard& shard : optimizer_partition_.shards()) {
    backend_.copy_from_host(tensor.view(shard.partition_offset, {shard.numel}),
                            full.data() + shard.flat_offset);
  }
}

std::vector<float> ZeroEngine::gather(State which) {
  const Tensor& tensor = state_tensor(which);
  std::vector<float> full(static_cast<size_t>(layout_.numel()));
  if (settings_.stage == 0) {
    backend_.copy_to_host(full.data(), tensor);
    return full;
  }
  Tensor gathered = allocate(layout_.numel(), DType::kF32, MemoryCategory::kCommBuffers);
  for (size_t u = 0; u < layout_.units().size(); ++u) {
    const ParameterUnit& unit = layout_.units()[u];
    const UnitShard& shard = partition_.shards()[u];
    const Tensor chunk = tensor.view(shard.partition_offset, {shard.numel});
    const Tensor out = gathered.view(unit.offset, {unit.padded_numel});
    if (comm_ != nullptr) {
      const Tensor input = reachable(chunk);  // before inputs_ready(), which covers the copy
      comm_->all_gather_async(input, out, inputs_ready()).wait();
    } else {
      backend_.copy(out, chunk);
    }
  }
  backend_.copy_to_host(full.data(), gathered);
  return full;
}

std::vector<float> ZeroEngine::owned_values(State which) const {
  const Tensor& tensor = state_tensor(which);
  std::vector<float> packed;
  for (const PartitionSegment& segment : optimizer_partition_.segments()) {
    const size_t next = packed.size();
    packed.resize(next + static_cast<size_t>(segment.numel));
    backend_.copy_to_host(packed.data() + next,
                          tensor.view(segment.partition_offset, {segment.numel}));
  }
  return packed;
}

void ZeroEngine::load_owned(State which, std::span<const float> packed) {
  int64_t owned = 0;
  for (const PartitionSegment& segment : optimizer_partition_.segments()) owned += segment.numel;
  MIXTRAIN_CHECK_ARG(static_cast<int64_t>(packed.size()) == owned,
                     "ZeroEngine::load_owned: got " + std::to_string(packed.size()) +
                         " values, this rank owns " + std::to_string(owned));
  const Tensor& tensor = state_tensor(which);
  const float* next = packed.data();
  for (const PartitionSegment& segment : optimizer_partition_.segments()) {
    backend_.copy_from_host(tensor.view(segment.partition_offset, {segment.numel}), next);
    next += segment.numel;
  }
}

void ZeroEngine::refresh_weights() {
  if (host_ops_) {  // cast on the CPU, then copy each owned chunk to the device
    host_ops_->cast(host_weights_, master_);
    for (const UnitShard& shard : optimizer_partition_.shards()) {
      backend_.copy(params_.view(settings_.stage == 3 ? shard.partition_offset : shard.flat_offset,
                                 {shard.numel}),
                    host_weights_.view(shard.partition_offset, {shard.numel}));
    }
    if (settings_.stage == 1 || settings_.stage == 2) gather_weights();
    return;
  }
  if (settings_.stage == 0 || settings_.stage == 3) {
    if (params_.data() != master_.data()) backend_.cast(params_, master_);
    return;
  }
  for (const UnitShard& shard : partition_.shards()) {
    backend_.cast(params_.view(shard.flat_offset, {shard.numel}),
                  master_.view(shard.partition_offset, {shard.numel}));
  }
  gather_weights();
}

void ZeroEngine::gather_weights() {
  if (comm_ == nullptr) return;
  std::vector<CommHandle> handles;
  for (size_t u = 0; u < layout_.units().size(); ++u) {
    const ParameterUnit& unit = layout_.units()[u];
    const UnitShard& shard = partition_.shards()[u];
    handles.push_back(
        comm_->all_gather_async(params_.view(shard.flat_offset, {shard.numel}),
                                params_.view(unit.offset, {unit.padded_numel}), inputs_ready()));
  }
  for (const CommHandle& handle : handles) handle.wait();
}

void ZeroEngine::begin_step() { backend_.set_zero(grads_); }

GptWeights& ZeroEngine::train_weights(bool reduce) {
  weights_->set_reduce(reduce);
  return *weights_;
}

GptWeights& ZeroEngine::eval_weights() {
  weights_->set_reduce(false);
  return *weights_;
}

std::optional<size_t> ZeroEngine::next_unit(size_t unit, GptPass pass) const {
  const size_t lnf = layout_.lnf_unit();
  if (pass == GptPass::kForward) {  // embeddings, h.0 ... h.L-1, ln_f
    if (unit == lnf) return std::nullopt;
    return unit + 1;
  }
  // Backward: embeddings (head), ln_f, h.L-1 ... h.0.
  if (unit == ParameterLayout::kEmbeddingsUnit) return lnf;
  if (unit == layout_.block_unit(0)) return std::nullopt;
  return unit - 1;
}

void ZeroEngine::start_gather(size_t unit_index) {
  const ParameterUnit& unit = layout_.units()[unit_index];
  const UnitShard& shard = partition_.shards()[unit_index];
  if (prefetch_) gathered_buffers_.give_back(std::move(prefetch_->buffer));  // not acquired
  Prefetch prefetch{unit_index, gathered_buffers_.take(unit.padded_numel), CommHandle()};
  const Tensor chunk = params_.view(shard.partition_offset, {shard.numel});
  if (comm_ != nullptr) {
    const Tensor input = reachable(chunk);  // before inputs_ready(), which covers the copy
    prefetch.handle = comm_->all_gather_async(input, prefetch.buffer, inputs_ready());
  } else {
    backend_.copy(prefetch.buffer, chunk);
  }
  prefetch_ = std::move(prefetch);
}

void ZeroEngine::on_acquire(size_t unit_index, GptPass pass) {
  const ParameterUnit& unit = layout_.units()[unit_index];
  if (settings_.stage == 3) {
    if (!prefetch_ || prefetch_->unit != unit_index) {
      if (prefetch_) prefetch_->handle.wait();  // a pass that stopped early
      start_gather(unit_index);
    }
    prefetch_->handle.wait();
    gathered_[unit_index] = std::move(prefetch_->buffer);
    prefetch_.reset();
    if (const std::optional<size_t> next = next_unit(unit_index, pass)) start_gather(*next);
  }
  if (pass == GptPass::kBackward && settings_.stage >= 2) {
    buckets_[unit_index] = reduce_buffers_.take(unit.padded_numel);
    backend_.set_zero(buckets_[unit_index]);  // backward accumulates into it
  }
}

void ZeroEngine::on_release(size_t unit_index, GptPass pass, bool reduce) {
  if (settings_.stage == 3) gathered_buffers_.give_back(std::move(gathered_[unit_index]));
  if (pass != GptPass::kBackward) return;
  const ParameterUnit& unit = layout_.units()[unit_index];
  const UnitShard& shard = partition_.shards()[unit_index];
  PendingReduce pending;
  pending.unit = unit_index;
  if (settings_.stage >= 2) {
    pending.bucket = std::exchange(buckets_[unit_index], Tensor());
    pending.shard = reduce_buffers_.take(shard.numel);
    if (comm_ != nullptr) {
      pending.handle = comm_->reduce_scatter_async(pending.bucket, pending.shard, ReduceOp::kSum,
                                                   inputs_ready());
    } else {
      backend_.copy(pending.shard, pending.bucket);
    }
  } else if (reduce && comm_ != nullptr && settings_.stage == 1) {
    pending.handle =
        comm_->reduce_scatter_async(grads_.view(unit.offset, {unit.padded_numel}),
                                    grads_.view(shard.flat_offset, {shard.numel}), ReduceOp::kSum,
                                    inputs_ready());
  } else if (reduce && comm_ != nullptr) {
    // Backward releases units from the end of the buffer to its start, so
    // the open bucket grows downwards and stays contiguous.
    if (bucket_begin_ == bucket_end_) bucket_end_ = unit.offset + unit.padded_numel;
    bucket_begin_ = unit.offset;
    const int64_t bytes =
        (bucket_end_ - bucket_begin_) * static_cast<int64_t>(dtype_size(grad_dtype_));
    if (bytes >= settings_.bucket_bytes || unit_index == ParameterLayout::kEmbeddingsUnit)
      flush_bucket();
    return;
  } else {
    return;
  }
  pending_.push_back(std::move(pending));
  drain(2);
}

void ZeroEngine::flush_bucket() {
  if (bucket_begin_ == bucket_end_) return;
  PendingReduce pending;
  pending.handle =
      comm_->all_reduce_async(grads_.view(bucket_begin_, {bucket_end_ - bucket_begin_}),
                              ReduceOp::kSum, inputs_ready());
  bucket_begin_ = bucket_end_ = 0;
  pending_.push_back(std::move(pending));
  drain(2);
}

void ZeroEngine::drain(size_t keep) {
  while (pending_.size() > keep) {
    PendingReduce& front = pending_.front();
    front.handle.wait();
    if (front.shard.defined()) {
      const UnitShard& shard = partition_.shards()[front.unit];
      const Tensor owned = grads_.view(shard.partition_offset, {shard.numel});
      backend_.add(owned, owned, front.shard);
      reduce_buffers_.give_back(std::move(front.bucket));
      reduce_buffers_.give_back(std::move(front.shard));
    }
    pending_.pop_front();
  }
}

void ZeroEngine::finish_gradients() {
  if (settings_.stage == 0 && comm_ != nullptr) flush_bucket();
  drain(0);
}

std::vector<Tensor> ZeroEngine::owned_gradient_views() const {
  std::vector<Tensor> views;
  for (const PartitionSegment& segment : optimizer_partition_.segments()) {
    const int64_t offset = settings_.stage < 2 ? segment.flat_offset : segment.partition_offset;
    views.push_back(grads_.view(offset, {segment.numel}));
  }
  return views;
}

float ZeroEngine::all_reduce_scalar(float value, ReduceOp op) {
  if (comm_ == nullptr) return value;
  const Tensor scalar = allocate(1, DType::kF32, MemoryCategory::kCommBuffers);
  backend_.copy_from_host(scalar, &value);  // synchronous: no inputs_ready() needed
  comm_->all_reduce(scalar, op);
  float reduced = 0.0f;
  backend_.copy_to_host(&reduced, scalar);
  return reduced;
}

NonFiniteCheck ZeroEngine::check_gradients() {
  const std::vector<Tensor> views = owned_gradient_views();
  NonFiniteCheck local = backend_.unscale_and_check(views, 1.0f);  // a factor of 1 changes no bit
  if (local.found) {
    local.tensor_index = static_cast<int>(
        optimizer_partition_.segments()[static_cast<size_t>(local.tensor_index)].parameter);
  }
  if (settings_.stage == 0 || comm_ == nullptr) return local;  // every rank saw every gradient
  // MAX over ranks of 2 * (count - parameter) + is_nan picks the first
  // parameter holding inf/NaN, and NaN when one rank saw NaN there.
  const float count = static_cast<float>(layout_.parameters().size());
  const float mine = local.found ? 2.0f * (count - static_cast<float>(local.tensor_index)) +
                                       (local.is_nan ? 1.0f : 0.0f)
                                 : 0.0f;
  const float agreed = all_reduce_scalar(mine, ReduceOp::kMax);
  NonFiniteCheck out;
  if (agreed > 0.0f) {
    out.found = true;
    out.is_nan = std::fmod(agreed, 2.0f) == 1.0f;
    out.tensor_index = static_cast<int>(count - std::floor(agreed / 2.0f));
  }
  return out;
}

double ZeroEngine::gradient_norm(float loss_scale) {
  const std::vector<Tensor> views = owned_gradient_views();
  double sum = backend_.sum_squares(views);
  if (settings_.stage > 0 && comm_ != nullptr)  // one rank keeps the fp64 sum
    sum = all_reduce_scalar(static_cast<float>(sum), ReduceOp::kSum);
  return std::sqrt(sum) / loss_scale;
}

std::vector<AdamWParam> ZeroEngine::adam_params(size_t first, size_t end, const Tensor& grads,
                                                const Tensor& working) const {
  const bool grads_are_partition = grads.defined() || settings_.stage >= 2;
  const bool working_is_partition = working.defined() || settings_.stage == 3;
  const Tensor& grad_source = grads.defined() ? grads : grads_;
  const Tensor& working_target = working.defined() ? working : params_;
  const bool separate_working = working_target.data() != master_.data();
  std::vector<AdamWParam> params;
  for (size_t i = first; i < end; ++i) {
    const PartitionSegment& segment = optimizer_partition_.segments()[i];
    const Shape shape{segment.numel};
    AdamWParam param;
    param.master = master_.view(segment.partition_offset, shape);
    param.m = adam_m_.view(segment.partition_offset, shape);
    param.v = adam_v_.view(segment.partition_offset, shape);
    param.grad = grad_source.view(
        grads_are_partition ? segment.partition_offset : segment.flat_offset, shape);
    if (separate_working) {
      param.param_out = working_target.view(
          working_is_partition ? segment.partition_offset : segment.flat_offset, shape);
    }
    param.decay = layout_.parameters()[segment.parameter].decay;
    params.push_back(std::move(param));
  }
  return params;
}

void ZeroEngine::optimizer_step(const AdamWConfig& config) {
  if (host_ops_) {
    host_optimizer_step(config);
  } else {
    adamw_step(backend_, adam_params(0, optimizer_partition_.segments().size(), Tensor(), Tensor()),
               config);
  }
  if (settings_.stage == 1 || settings_.stage == 2) gather_weights();
}

void ZeroEngine::host_optimizer_step(const AdamWConfig& config) {
  // Each unit's owned gradients go to the host on the transfer stream once
  // backward's work is done; the CPU updates unit u while unit u+1's
  // gradients and unit u-1's weights are on the way.
  const std::unique_ptr<Event> backward_done = backend_.record_event(StreamKind::kCompute);
  backend_.wait_event(StreamKind::kTransfer, *backward_done);
  const std::vector<UnitShard>& shards = optimizer_partition_.shards();
  const bool grads_are_partition = settings_.stage >= 2;
  const bool working_is_partition = settings_.stage == 3;
  std::vector<std::unique_ptr<Event>> arrived;
  for (const UnitShard& shard : shards) {
    backend_.copy(host_grads_.view(shard.partition_offset, {shard.numel}),
                  grads_.view(grads_are_partition ? shard.partition_offset : shard.flat_offset,
                              {shard.numel}),
                  StreamKind::kTransfer);
    arrived.push_back(backend_.record_event(StreamKind::kTransfer));
  }
  for (size_t u = 0; u < shards.size(); ++u) {
    arrived[u]->wait();
    const auto [first, end] = unit_segments_[u];
    adamw_step(*host_ops_, adam_params(first, end, host_grads_, host_weights_), config);
    const UnitShard& shard = shards[u];
    backend_.copy(params_.view(working_is_partition ? shard.partition_offset : shard.flat_offset,
                               {shard.numel}),
                  host_weights_.view(shard.partition_offset, {shard.numel}), StreamKind::kTransfer);
  }
  const std::unique_ptr<Event> weights_back = backend_.record_event(StreamKind::kTransfer);
  backend_.wait_event(StreamKind::kCompute, *weights_back);
}

}  // namespace mixtrain
