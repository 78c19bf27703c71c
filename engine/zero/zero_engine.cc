// Why: the engine's state, placed once from the stage and offload flags,
// and the step stages over it (see zero_engine.h).
#include "engine/zero/zero_engine.h"

#include <cmath>
#include <string>
#include <utility>

#include "engine/common/error.h"

namespace mixtrain {

// The ModelWeights of the engine: acquire/release go to stage 3's gatherer
// and the gradient reduction; parameters are views of the full buffer or
// the gathered unit, gradients wherever the reduction has backward add.
class ZeroEngine::Weights final : public ModelWeights {
 public:
  explicit Weights(ZeroEngine& engine) : engine_(engine) {}
  void set_last_micro_batch(bool last) { last_micro_batch_ = last; }

  void acquire(size_t unit, ModelPass pass) override {
    if (engine_.gatherer_) engine_.gatherer_->acquire(unit, pass);
    if (pass == ModelPass::kBackward) engine_.reduction_->begin_unit(unit);
  }
  void release(size_t unit, ModelPass pass) override {
    if (engine_.gatherer_) engine_.gatherer_->release(unit);
    if (pass == ModelPass::kBackward) engine_.reduction_->end_unit(unit, last_micro_batch_);
  }
  Tensor param(const ParameterInfo& info) override {
    if (engine_.gatherer_) return engine_.gatherer_->param(info);
    return parameter_view(engine_.params_.tensor(), info);
  }
  Tensor grad(const ParameterInfo& info) override { return engine_.reduction_->grad(info); }

 private:
  ZeroEngine& engine_;
  bool last_micro_batch_ = false;
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

ZeroEngine::ZeroEngine(Backend& backend, const Model& model, Communicator* comm,
                       ZeroSettings settings)
    : backend_(backend),
      layout_(model.layout()),
      comm_(comm),
      settings_(checked(settings, backend, comm)),
      placement_(zero_placement(settings_, model.compute_dtype())),
      world_size_(comm ? comm->world_size() : 1),
      partition_(layout_, comm ? comm->rank() : 0, world_size_),
      optimizer_partition_(
          placement_.optimizer.extent == Extent::kFull ? ZeroPartition(layout_, 0, 1) : partition_),
      context_{backend, layout_, partition_, comm} {
  state_.master = allocate(placement_.optimizer, DType::kF32, MemoryCategory::kMasterParams);
  state_.adam_m = allocate(placement_.optimizer, DType::kF32, MemoryCategory::kOptimizerState);
  state_.adam_v = allocate(placement_.optimizer, DType::kF32, MemoryCategory::kOptimizerState);
  params_ = PlacedTensor(
      placement_.weights_are_master
          ? state_.master
          : allocate(placement_.weights, model.compute_dtype(), MemoryCategory::kParams),
      placement_.weights.extent);
  grads_ = PlacedTensor(allocate(placement_.gradients, model.grad_dtype(), MemoryCategory::kGrads),
                        placement_.gradients.extent);
  reduction_ = make_gradient_reduction(context_, placement_, grads_, settings_);
  if (placement_.gathers_each_unit())
    gatherer_ = std::make_unique<UnitGatherer>(context_, params_.tensor());
  if (placement_.optimizer.pool == MemoryPool::kHost) {
    host_optimizer_ = std::make_unique<HostOptimizer>(context_, optimizer_partition_, state_,
                                                      model.grad_dtype(), model.compute_dtype());
  }
  weights_ = std::make_unique<Weights>(*this);
}

ZeroEngine::~ZeroEngine() = default;

Tensor ZeroEngine::allocate(StatePlacement placement, DType dtype, MemoryCategory category) const {
  const int64_t numel = placement.extent == Extent::kFull ? layout_.numel() : partition_.numel();
  return context_.allocate(numel, dtype, category, placement.pool);
}

const Tensor& ZeroEngine::state_tensor(State which) const {
  return which == State::kMaster  ? state_.master
         : which == State::kAdamM ? state_.adam_m
                                  : state_.adam_v;
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
  if (placement_.optimizer.extent == Extent::kFull) {
    backend_.copy_to_host(full.data(), tensor);
    return full;
  }
  Tensor gathered = context_.allocate(layout_.numel(), DType::kF32, MemoryCategory::kCommBuffers);
  for (size_t u = 0; u < layout_.units().size(); ++u) {
    const ParameterUnit& unit = layout_.units()[u];
    const UnitShard& shard = partition_.shards()[u];
    context_
        .all_gather(tensor.view(shard.partition_offset, {shard.numel}),
                    gathered.view(unit.offset, {unit.padded_numel}))
        .wait();
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
  if (host_optimizer_) {
    host_optimizer_->refresh(params_);
  } else if (!placement_.weights_are_master) {
    for (const UnitShard& shard : optimizer_partition_.shards()) {
      backend_.cast(params_.at(shard), state_.master.view(shard.partition_offset, {shard.numel}));
    }
  }
  if (placement_.gathers_updated_weights()) gather_weights();
}

void ZeroEngine::gather_weights() {
  if (comm_ == nullptr) return;
  std::vector<CommHandle> handles;
  for (size_t u = 0; u < layout_.units().size(); ++u) {
    const ParameterUnit& unit = layout_.units()[u];
    handles.push_back(comm_->all_gather_async(
        params_.at(partition_.shards()[u]), params_.tensor().view(unit.offset, {unit.padded_numel}),
        context_.inputs_ready()));
  }
  for (const CommHandle& handle : handles) handle.wait();
}

void ZeroEngine::begin_step() { backend_.set_zero(grads_.tensor()); }

ModelWeights& ZeroEngine::train_weights(bool reduce) {
  weights_->set_last_micro_batch(reduce);
  return *weights_;
}

ModelWeights& ZeroEngine::eval_weights() {
  weights_->set_last_micro_batch(false);
  return *weights_;
}

void ZeroEngine::finish_gradients() { reduction_->finish(); }

std::vector<Tensor> ZeroEngine::owned_gradient_views() const {
  std::vector<Tensor> views;
  for (const PartitionSegment& segment : optimizer_partition_.segments())
    views.push_back(grads_.at(segment));
  return views;
}

float ZeroEngine::all_reduce_scalar(float value, ReduceOp op) {
  all_reduce_values({&value, 1}, op);
  return value;
}

void ZeroEngine::all_reduce_values(std::span<float> values, ReduceOp op) {
  if (comm_ == nullptr || values.empty()) return;
  const Tensor buffer = context_.allocate(static_cast<int64_t>(values.size()), DType::kF32,
                                          MemoryCategory::kCommBuffers);
  backend_.copy_from_host(buffer, values.data());  // synchronous: no inputs_ready() needed
  comm_->all_reduce(buffer, op);
  backend_.copy_to_host(values.data(), buffer);
}

NonFiniteCheck ZeroEngine::check_gradients() {
  const std::vector<Tensor> views = owned_gradient_views();
  NonFiniteCheck local = backend_.unscale_and_check(views, 1.0f);  // a factor of 1 changes no bit
  if (local.found) {
    local.tensor_index = static_cast<int>(
        optimizer_partition_.segments()[static_cast<size_t>(local.tensor_index)].parameter);
  }
  if (placement_.every_rank_sees_every_gradient() || comm_ == nullptr) return local;
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
  if (!placement_.every_rank_sees_every_gradient() && comm_ != nullptr)  // one rank keeps fp64
    sum = all_reduce_scalar(static_cast<float>(sum), ReduceOp::kSum);
  return std::sqrt(sum) / loss_scale;
}

void ZeroEngine::optimizer_step(const AdamWConfig& config) {
  if (host_optimizer_) {
    host_optimizer_->step(config, grads_, params_);
  } else {
    adamw_step(backend_,
               state_.adamw_params(layout_, optimizer_partition_.segments(), grads_,
                                   placement_.weights_are_master ? nullptr : &params_),
               config);
  }
  if (placement_.gathers_updated_weights()) gather_weights();
}

}  // namespace mixtrain
