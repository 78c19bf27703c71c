// Why: the emulation runs every stream's work at once, in call order, so
// it cannot show a missing wait; what it can show is which runtime calls
// the backend makes. The stub runtime (cuda_runtime_stub.cc) counts the
// ones that block or allocate (and the cuBLASLt GEMMs), logs the ones that
// order streams, and lets a test hold events "not ready" as if the GPU
// were still busy.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace emu {

struct RuntimeCalls {
  int device_synchronizations = 0;  // cudaDeviceSynchronize
  int stream_synchronizations = 0;  // cudaStreamSynchronize
  int blocking_frees = 0;           // cudaFree, cudaFreeHost
  int pool_allocations = 0;         // cudaMallocAsync
  int pool_frees = 0;               // cudaFreeAsync
  int pinned_allocations = 0;       // cudaMallocHost
  int lt_matmuls = 0;               // cublasLtMatmul (cublaslt_stub.cc)
  int lt_fp8_matmuls = 0;           // those of them with fp8 inputs
  int lt_heuristics = 0;            // cublasLtMatmulAlgoGetHeuristic
  int pool_trims = 0;               // cudaMemPoolTrimTo
  uint64_t pool_release_threshold = 0;  // the last cudaMemPoolAttrReleaseThreshold set
  // "record e<N> on s<M>", "s<M> waits e<N>", "free on s<M>", in call order.
  std::vector<std::string> stream_order;
};

// The calls made so far in this process.
RuntimeCalls runtime_calls();
// The emulated device's compute capability as major * 10 + minor: 90, or
// the MIXTRAIN_EMULATED_SM environment variable's value when set (read at
// each call, so a test can emulate sm_100 for the backends it makes).
int compute_capability();
// Count one cublasLtMatmul (with fp8 inputs or not), one
// cublasLtMatmulAlgoGetHeuristic (the cuBLASLt stub's).
void count_lt_matmul(bool fp8);
void count_lt_heuristic();
// Queues `work` on `stream` (stream_queues.h): what the cuBLAS stubs'
// GEMMs and the kernel launches do.
void enqueue_on(cudaStream_t stream, std::function<void()> work);
// While held, cudaEventQuery answers cudaErrorNotReady for every event.
void hold_events(bool held);
// How full the emulated device is for cudaMallocAsync: kRoom, kPoolHoldsIt
// (out of memory until cudaMemPoolTrimTo gives the pool's free blocks
// back, as when the pool keeps what earlier steps freed), kFull (out of
// memory whatever is trimmed).
enum class DeviceMemory { kRoom, kPoolHoldsIt, kFull };
// The emulated device's memory, as cudaMemGetInfo reports it: an H100's.
inline constexpr size_t kDeviceMemoryBytes = size_t{80} << 30;
void set_device_memory(DeviceMemory state);
// Runs `other_thread_work` once, at the start of the next cudaMemcpyAsync,
// before the copy is on its stream: what another thread does in the moment
// between an op's bookkeeping and its enqueue.
void before_next_memcpy(std::function<void()> other_thread_work);
// "s<M>", the name `stream` has in stream_order.
std::string stream_name(cudaStream_t stream);

}  // namespace emu
