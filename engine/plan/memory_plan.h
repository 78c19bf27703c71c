// Why: a job used to find out whether it fits by running out of memory.
// The engine counts every byte by category (MemoryTracker), and what it
// allocates follows from the job spec: the model states from the ZeRO
// placement (DESIGN.md §6), the activations from the model shape and the
// checkpointing mode, the ZeRO buffers from the unit sizes, the kernels'
// workspace from their largest op, the tokens held in memory from the data
// sources (files are mapped: none). This predicts a rank's peak bytes per
// (pool, category) for a spec and a world size, with the per-step costs
// the alternatives are ranked by, so `mixtrain plan` and the coordinator's
// admission say before a run what it needs.
#pragma once

#include <array>
#include <cstdint>

#include "engine/backend/memory_tracker.h"
#include "engine/config/job_spec.h"

namespace mixtrain::plan {

// What the ranks run on.
struct PlanTarget {
  int64_t world_size = 1;
  bool cuda = false;              // GPUs (else the CPU backend)
  int64_t cpu_threads = 1;        // OpenMP threads per rank on the CPU backend
  bool bf16_gemm_staged = false;  // the CPU's bf16 GEMMs run on fp32 copies (no native kernel)
};

// This machine's CPU backend for `world_size` local ranks: their threads as
// the launcher gives them, GEMMs as this CPU's oneDNN runs them.
PlanTarget cpu_target(int64_t world_size);

struct MemoryPlan {
  // A rank's peak bytes per pool and category (MemoryPool, MemoryCategory
  // order), as the summary's memory_bytes report them.
  std::array<std::array<int64_t, kNumMemoryCategories>, kNumMemoryPools> bytes{};
  // Every category's peak together: what the pool holds during the
  // backward, where the long-lived buffers, the activations and the
  // largest op's workspace meet.
  int64_t peak(MemoryPool pool) const;
  int64_t at(MemoryPool pool, MemoryCategory category) const {
    return bytes[static_cast<size_t>(pool)][static_cast<size_t>(category)];
  }
  // On a GPU, what the CUDA runtime and NCCL allocate beside the engine's
  // tensors (device_reserve.h), which no category counts; 0 on the CPU.
  int64_t device_runtime = 0;
  // What the device must hold: the device pool's peak and the runtime's.
  int64_t device_need() const;
  // Per rank and step: elements sent by the collectives (§6: 2Ψ(N-1)/N a
  // reduction, Ψ(N-1)/N a gather), forward FLOPs the checkpointing
  // recomputes, and bytes between the pools for offload.
  int64_t comm_elements_per_step = 0;
  int64_t recompute_flops_per_step = 0;
  int64_t host_traffic_bytes_per_step = 0;
};

// The plan of `spec` (validated, no key left `auto`) on `target`;
// resources.workers is ignored for target.world_size. Throws
// EngineError(kInvalidArgument) when a figure is too large to plan, or a
// key is still `auto`.
MemoryPlan plan_memory(const config::JobSpec& spec, const PlanTarget& target);

// The target the coordinator plans `spec` for: spec.resources.workers ranks
// on spec's backend, on any machine (one thread per rank, bf16 GEMMs
// staged in fp32: the larger workspace of the two).
PlanTarget scheduling_target(const config::JobSpec& spec);

}  // namespace mixtrain::plan
