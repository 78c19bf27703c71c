// Why: see memory_plan.h. Each figure follows the code that allocates it,
// named beside the formula, so a change there shows here as a failing
// plan_accuracy test.
#include "engine/plan/memory_plan.h"

#include <algorithm>

#include "engine/backend/cuda_workspace.h"
#include "engine/backend/device_reserve.h"
#include "engine/comm/ring.h"
#include "engine/common/error.h"
#include "engine/data/train_val_split.h"
#include "engine/model/gpt_activations.h"
#include "engine/model/gpt_config.h"
#include "engine/model/parameter_layout.h"
#include "engine/plan/checked_bytes.h"
#include "engine/zero/gradient_reduction.h"
#include "engine/zero/unit_gatherer.h"
#include "engine/zero/zero_partition.h"
#include "engine/zero/zero_placement.h"

namespace mixtrain::plan {
namespace {

using config::ActivationCheckpointing;

// The sizes one micro-batch works on.
struct Dims {
  int64_t batch, seq, dim, heads, layers, padded_vocab;
  int64_t positions;  // batch * seq
  int64_t element;    // bytes of the model dtype (activations, weights, gradients)
  DType model;
};

// The model's activations (gpt_activations.h: what it allocates, by the
// same tables) and the trainer's host-readable token and target batches
// (two int32 per position).
int64_t activation_bytes(const Dims& d, const GptConfig& model, DType dtype,
                         ActivationCheckpointing mode) {
  const int64_t per_position =
      checked_sum({activation_bytes_per_position(model, dtype, d.seq, mode), 8}, "activations");
  return checked_product({d.positions, per_position}, "activations");
}

// The largest workspace one op of the CPU backend holds.
int64_t cpu_workspace_bytes(const Dims& d, const PlanTarget& target) {
  const int64_t pc = checked_product({d.positions, d.dim}, "workspace");
  const int64_t bhtt = checked_product({d.batch, d.heads, d.seq, d.seq}, "workspace");
  const bool bf16 = d.model == DType::kBF16, fp16 = d.model == DType::kF16;
  // cpu_attention.cc, attention_backward: q, k, v and dy split by head in
  // the operand dtype (bf16, else fp32), P copied to fp32 for fp16, dq dk
  // dv and dP in fp32, dS in bf16; then either dqkv's fp32 copy for
  // fp16's accumulation or, where bf16 GEMMs are staged, the fp32 copies
  // of dS and k (the larger of the two at the end).
  const int64_t operand = bf16 ? 2 : 4;
  const int64_t attention = checked_sum(
      {checked_product({4, pc, operand}, "workspace"),
       fp16 ? checked_product({bhtt, 4}, "workspace") : 0, checked_product({3, pc, 4}, "workspace"),
       checked_product({bhtt, 4}, "workspace"), bf16 ? checked_product({bhtt, 2}, "workspace") : 0,
       std::max(
           fp16 ? checked_product({3, pc, 4}, "workspace") : 0,
           bf16 && target.bf16_gemm_staged ? checked_product({bhtt + pc, 4}, "workspace") : 0)},
      "workspace");
  // cpu_gemm.cc: a GEMM without a kernel for its dtype runs on fp32 copies
  // of A, B and C (and the bias): the MLP's (P x C, 4C x C, P x 4C) or the
  // head's (P x C, Vp x C, P x Vp).
  const bool staged = fp16 || (bf16 && target.bf16_gemm_staged);
  const int64_t mlp =
      checked_sum({5 * pc, checked_product({4 * d.dim, d.dim + 1}, "workspace")}, "workspace");
  const int64_t head = checked_sum(
      {pc, checked_product({d.padded_vocab, d.dim + d.positions}, "workspace")}, "workspace");
  const int64_t staging = staged ? checked_product({4, std::max(mlp, head)}, "workspace") : 0;
  // cpu_elementwise.cc: a binary op's three fp32 chunks of 4096 per thread.
  const int64_t elementwise = checked_product({target.cpu_threads, 3 * 4096 * 4}, "workspace");
  // compute fp8 (fp8_linear.cc, fp8_matmul.cc): the largest GEMM's operands
  // as codes (1 byte) and their bf16 values, dequantized for the GEMM.
  const int64_t fp8 =
      d.model == DType::kFP8E4M3
          ? checked_product({3, checked_sum({5 * pc, 4 * d.dim * d.dim}, "workspace")}, "workspace")
          : 0;
  return std::max({attention, staging, elementwise, fp8});
}

// CUDA: cuBLAS's workspace and the scratch buffer at its largest, the
// attention backward's, sized by the very functions the backend allocates
// by (cuda_workspace.h), for activations of dtype `activations`. cuBLAS's
// workspace is that of a Hopper or newer GPU: the plan is for any GPU.
int64_t cuda_workspace_bytes(const Dims& d, DType activations) {
  // Bounds the scratch's sizes before they are computed unchecked.
  (void)checked_product({d.batch, d.heads, d.seq, d.seq, 4 + 4}, "workspace");
  (void)checked_product({d.positions, d.dim, 3 * (4 + 4)}, "workspace");
  const AttentionDims dims{d.batch, d.seq, d.dim, d.heads};
  const size_t scratch = scratch_offsets(attention_backward_scratch(dims, activations, activations,
                                                                    activations, activations))
                             .back();
  return checked_sum({static_cast<int64_t>(cublas_workspace_bytes(90)),
                      static_cast<int64_t>(scratch_buffer_bytes(scratch))},
                     "workspace");
}

}  // namespace

int64_t MemoryPlan::device_need() const {
  return checked_sum({peak(MemoryPool::kDevice), device_runtime}, "the device's need");
}

int64_t MemoryPlan::peak(MemoryPool pool) const {
  int64_t total = 0;
  for (int64_t bytes : this->bytes[static_cast<size_t>(pool)])
    total = checked_sum({total, bytes}, "the peak");
  return total;
}

MemoryPlan plan_memory(const config::JobSpec& spec, const PlanTarget& target) {
  if (spec.auto_keys.any()) {
    throw EngineError(ErrorCode::kInvalidArgument,
                      "cannot plan " + config::auto_key_names(spec.auto_keys) +
                          " while auto: choose the configuration first");
  }
  const int64_t ranks = target.world_size;
  const GptConfig model = gpt_config(spec.model);
  const ParameterLayout layout(model, ranks);
  const DType dtype = config::model_dtype(spec.precision);
  const Dims d{spec.train.micro_batch,
               spec.model.seq_len,
               model.dim,
               model.heads,
               model.layers,
               model.padded_vocab(),
               checked_product({spec.train.micro_batch, spec.model.seq_len}, "the batch"),
               static_cast<int64_t>(dtype_size(dtype)),
               config::is_fp8_compute(spec.precision) ? DType::kFP8E4M3 : dtype};
  const int64_t e = d.element;
  const int64_t psi = layout.numel();  // padded for the ranks: each rank's shard is psi / ranks
  const int64_t shard = psi / ranks;
  const ZeroSettings settings = zero_settings(spec.zero);
  const ZeroPlacement placement = zero_placement(settings, dtype);

  MemoryPlan plan;
  auto add = [&](MemoryPool pool, MemoryCategory category, int64_t bytes) {
    int64_t& slot = plan.bytes[static_cast<size_t>(pool)][static_cast<size_t>(category)];
    slot = checked_sum({slot, bytes}, memory_category_name(category));
  };
  auto elements = [&](const StatePlacement& state) {
    return state.extent == Extent::kPartition ? shard : psi;
  };
  // The model states (zero_engine.cc through zero_placement).
  if (!placement.weights_are_master)
    add(placement.weights.pool, MemoryCategory::kParams,
        checked_product({e, elements(placement.weights)}, "params"));
  add(placement.gradients.pool, MemoryCategory::kGrads,
      checked_product({e, elements(placement.gradients)}, "grads"));
  add(placement.optimizer.pool, MemoryCategory::kMasterParams,
      checked_product({4, elements(placement.optimizer)}, "master params"));
  add(placement.optimizer.pool, MemoryCategory::kOptimizerState,
      checked_product({8, elements(placement.optimizer)}, "optimizer state"));
  // host_optimizer.cc: the partition's gradients and updated weights in
  // the host pool, on their way between the pools.
  if (placement.optimizer.pool == MemoryPool::kHost)
    add(MemoryPool::kHost, MemoryCategory::kCommBuffers,
        checked_product({2 * e, elements(placement.optimizer)}, "comm buffers"));

  add(MemoryPool::kDevice, MemoryCategory::kActivations,
      activation_bytes(d, model, dtype, spec.train.activation_checkpointing));

  // The buffers the ZeRO pieces reserve, by the functions they size them
  // with; the ring's two chunk buffers (ring.h) beside them.
  const auto total = [](const std::vector<int64_t>& sizes) {
    int64_t sum = 0;
    for (const int64_t numel : sizes) sum = checked_sum({sum, numel}, "ZeRO buffers");
    return sum;
  };
  if (placement.gathers_each_unit()) {
    add(MemoryPool::kDevice, MemoryCategory::kGatheredParams,
        checked_product({e, total(gathered_buffer_sizes(layout))}, "gathered params"));
  }
  if (reduction_strategy(placement) == ReductionStrategy::kReduceScatterBuckets) {
    const ZeroPartition partition(layout, 0, static_cast<int>(ranks));
    const int64_t block = layout.units()[layout.block_unit(0)].padded_numel;
    add(MemoryPool::kDevice, MemoryCategory::kCommBuffers,
        checked_product({e, total(reduce_scatter_buffer_sizes(layout, partition))},
                        "comm buffers"));
    add(MemoryPool::kDevice, MemoryCategory::kCommBuffers,
        static_cast<int64_t>(
            ring_reduce_scatter_scratch_bytes(block, static_cast<int>(ranks), dtype)));
  }
  add(MemoryPool::kDevice, MemoryCategory::kWorkspace,
      target.cuda ? cuda_workspace_bytes(d, dtype) : cpu_workspace_bytes(d, target));
  if (target.cuda) plan.device_runtime = device_reserve(ranks).total();
  // train_val_split.cc: files are mapped, built-in corpora held in memory.
  add(MemoryPool::kHost, MemoryCategory::kData, data_bytes_in_memory(spec.data));

  // Per-step costs.
  const int64_t accum = spec.train.grad_accum;
  const int64_t ring_share = ranks > 1 ? psi / ranks * (ranks - 1) : 0;  // Ψ(N-1)/N
  switch (settings.stage) {
    case 0:
    case 1:
      plan.comm_elements_per_step = 2 * ring_share;
      break;
    case 2:
      plan.comm_elements_per_step = checked_product({accum + 1, ring_share}, "communication");
      break;
    default:
      plan.comm_elements_per_step = checked_product({3 * accum, ring_share}, "communication");
  }
  const int64_t attention_core = checked_product({4, d.batch, d.seq, d.seq, d.dim}, "recompute");
  int64_t per_block = 0;
  if (spec.train.activation_checkpointing == ActivationCheckpointing::kSelective)
    per_block = attention_core;
  if (spec.train.activation_checkpointing == ActivationCheckpointing::kBlocks)
    per_block =
        checked_sum({checked_product({16, d.positions, d.dim, d.dim}, "recompute"), attention_core},
                    "recompute");
  plan.recompute_flops_per_step = checked_product({accum, d.layers - 1, per_block}, "recompute");
  if (placement.optimizer.pool == MemoryPool::kHost)
    plan.host_traffic_bytes_per_step =
        checked_product({2 * e, elements(placement.optimizer)}, "host traffic");
  if (placement.weights.pool == MemoryPool::kHost)
    plan.host_traffic_bytes_per_step = checked_sum(
        {plan.host_traffic_bytes_per_step, checked_product({2 * accum, e, shard}, "host traffic")},
        "host traffic");
  return plan;
}

PlanTarget scheduling_target(const config::JobSpec& spec) {
  PlanTarget target;
  target.world_size = spec.resources.workers;
  target.cuda = spec.resources.backend == config::BackendChoice::kCuda;
  target.bf16_gemm_staged = true;
  return target;
}

}  // namespace mixtrain::plan
