// Why: per-thread scratch of the CPU ops (see cpu_parallel.h).
#include "engine/backend/cpu/cpu_parallel.h"

#include <omp.h>

namespace mixtrain::cpu_ops {

namespace {
constexpr int64_t kFloatsPerCacheLine = 16;
}  // namespace

ThreadScratch::ThreadScratch(Backend& backend, int64_t floats_per_thread)
    : stride_(chunk_count(floats_per_thread, kFloatsPerCacheLine) * kFloatsPerCacheLine),
      storage_(
          backend.empty({omp_get_max_threads(), stride_}, DType::kF32, MemoryCategory::kWorkspace)),
      base_(storage_.data_as<float>()) {}

float* ThreadScratch::mine() const { return base_ + omp_get_thread_num() * stride_; }

}  // namespace mixtrain::cpu_ops
