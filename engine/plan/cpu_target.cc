// Why: the plan of a run on this machine needs this machine's CPU backend
// (its threads, whether oneDNN stages bf16 GEMMs); kept apart from the
// planner's arithmetic (memory_plan.cc), so a program that plans for other
// machines (the coordinator) links no CPU kernels and no oneDNN.
#include <omp.h>

#include <algorithm>
#include <cstdlib>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/common/usable_cores.h"
#include "engine/plan/memory_plan.h"

namespace mixtrain::plan {

PlanTarget cpu_target(int64_t world_size) {
  PlanTarget target;
  target.world_size = world_size;
  // As the launcher sets them (launch/child_process.cc): OMP_NUM_THREADS
  // when given, else the usable cores shared among the local ranks.
  target.cpu_threads =
      std::getenv("OMP_NUM_THREADS") != nullptr
          ? omp_get_max_threads()
          : std::max<int64_t>(1, usable_cores() / std::max<int64_t>(1, world_size));
  CpuBackend backend;
  target.bf16_gemm_staged = !backend.gemm_runs_without_staging(DType::kBF16);
  return target;
}

}  // namespace mixtrain::plan
