// Why: data-parallel training with ZeRO (Rajbhandari et al., 2020). This
// owns one rank's model state (working weights, gradients, fp32 master
// weights, AdamW moments), placed as ZeroPlacement says for the stage and
// offload flags, and runs the step stages that touch it: reduction of
// gradients as backward releases each unit (GradientReduction), the
// overflow check and gradient norm agreed by all ranks, and the AdamW step
// on this rank's partition (on the CPU when offloaded: HostOptimizer)
// followed by the gathering of the updated weights. Stage 3 sees a unit's
// weights only while a pass has it acquired (UnitGatherer).
//
// Partitions follow ZeroPartition: rank r owns chunk r of every unit of
// the padded layout (the model built with unit_alignment = world size). On a GPU
// no collective waits for the device: each waits, on the communicator's
// stream, for an event recorded on the compute stream. Every rank must
// call the same methods in the same order.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/comm/communicator.h"
#include "engine/model/model.h"
#include "engine/optim/adamw.h"
#include "engine/zero/gradient_reduction.h"
#include "engine/zero/host_optimizer.h"
#include "engine/zero/optimizer_state.h"
#include "engine/zero/unit_gatherer.h"
#include "engine/zero/zero_context.h"
#include "engine/zero/zero_partition.h"
#include "engine/zero/zero_placement.h"

namespace mixtrain {

class ZeroEngine {
 public:
  // State for `model` (whose layout is aligned to the world size) on
  // `backend`; comm null means one rank. Both must outlive the engine.
  // Throws EngineError(kInvalidArgument) for a stage outside 0..3,
  // offload_params below stage 3, a misaligned layout, or a communicator
  // whose device is not the backend's.
  ZeroEngine(Backend& backend, const Model& model, Communicator* comm, ZeroSettings settings);
  ~ZeroEngine();
  ZeroEngine(const ZeroEngine&) = delete;
  ZeroEngine& operator=(const ZeroEngine&) = delete;

  int rank() const { return partition_.rank(); }
  int world_size() const { return world_size_; }
  const ZeroSettings& settings() const { return settings_; }
  // What this rank's master, adam_m and adam_v hold: the whole layout
  // (stage 0: one partition of world size 1) or its partition.
  const ZeroPartition& optimizer_partition() const { return optimizer_partition_; }
  // fp32 tensors of optimizer_partition().numel() elements.
  const Tensor& master() const { return state_.master; }
  const Tensor& adam_m() const { return state_.adam_m; }
  const Tensor& adam_v() const { return state_.adam_v; }

  // The fp32 optimizer state, by tensor.
  enum class State { kMaster, kAdamM, kAdamV };
  // Takes this rank's part of `full` (fp32, the layout's numel() values,
  // padding zero; the same on every rank) into the `which` tensor. After
  // the master weights changed, refresh_weights() must follow.
  void load(State which, std::span<const float> full);
  // The `which` tensor of the whole padded layout (numel() values),
  // gathered from every rank's partition (a collective).
  std::vector<float> gather(State which);
  // The `which` tensor's elements at optimizer_partition().segments(),
  // packed in segment order: the values this rank owns, without padding.
  std::vector<float> owned_values(State which) const;
  // The inverse: copies `packed` (owned_values' order and size) into the
  // `which` tensor, whose padding is left as it is (zero). After the master
  // weights changed, refresh_weights() must follow.
  void load_owned(State which, std::span<const float> packed);
  // Re-derives the working weights from the master weights (on every rank).
  void refresh_weights();

  // ---- one step -----------------------------------------------------------
  // Zeroes the gradients.
  void begin_step();
  // The weights for one training micro-batch: its forward and backward.
  // With reduce false (not the step's last micro-batch) stages 0 and 1
  // only accumulate locally; stages 2 and 3 reduce every micro-batch.
  ModelWeights& train_weights(bool reduce);
  // The weights for a forward-only pass (evaluation, sampling).
  ModelWeights& eval_weights();
  // Waits for every gradient reduction: this rank's owned gradients now
  // hold the sum over ranks.
  void finish_gradients();
  // The first parameter (layout index) whose owned gradient holds inf/NaN,
  // agreed by every rank.
  NonFiniteCheck check_gradients();
  // The global L2 norm of the gradients, divided by loss_scale.
  double gradient_norm(float loss_scale);
  // `value` reduced over the ranks (fp32; one rank: itself).
  float all_reduce_scalar(float value, ReduceOp op);
  // Every element of `values` reduced over the ranks in place (one
  // collective; one rank: unchanged).
  void all_reduce_values(std::span<float> values, ReduceOp op);
  // The views of this rank's owned gradients, one per segment of
  // optimizer_partition().segments(), in that order.
  std::vector<Tensor> owned_gradient_views() const;
  // AdamW (adamw_step) on this rank's partition, then the updated working
  // weights on every rank.
  void optimizer_step(const AdamWConfig& config);

 private:
  class Weights;

  const Tensor& state_tensor(State which) const;
  // Tensor of `extent`'s elements, placed as `placement`.
  Tensor allocate(StatePlacement placement, DType dtype, MemoryCategory category) const;
  // Gathers the owned chunks of the full working weights (stages 1, 2).
  void gather_weights();

  Backend& backend_;
  const ParameterLayout& layout_;
  Communicator* comm_;
  const ZeroSettings settings_;
  const ZeroPlacement placement_;
  const int world_size_;
  const ZeroPartition partition_;            // this rank's chunks of every unit
  const ZeroPartition optimizer_partition_;  // what master/m/v hold (partition_ or everything)
  const ZeroContext context_;
  OptimizerState state_;
  PlacedTensor params_;  // working weights, compute dtype
  PlacedTensor grads_;   // gradients, grad dtype
  std::unique_ptr<GradientReduction> reduction_;
  std::unique_ptr<UnitGatherer> gatherer_;         // stage 3
  std::unique_ptr<HostOptimizer> host_optimizer_;  // offload_optimizer
  std::unique_ptr<Weights> weights_;
};

}  // namespace mixtrain
