// Why: every CUDA runtime and cuBLAS failure must reach the caller as an
// EngineError naming the call that failed (the worker reports it to the
// user and the job fails cleanly), never as an abort or an ignored status.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "engine/common/error.h"

namespace mixtrain::gpu {

// Throws EngineError naming `call` and the CUDA error: kOutOfMemory for
// cudaErrorMemoryAllocation, kUnavailable for a missing driver or device,
// kInternal otherwise.
[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call);
// Throws EngineError naming `call` and the cuBLAS status (kOutOfMemory for
// CUBLAS_STATUS_ALLOC_FAILED, kInternal otherwise).
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call);

}  // namespace mixtrain::gpu

// Evaluates a CUDA runtime call; throws EngineError naming it on failure.
#define MIXTRAIN_CUDA_CHECK(call)                                             \
  do {                                                                        \
    const cudaError_t mixtrain_status_ = (call);                              \
    if (mixtrain_status_ != cudaSuccess)                                      \
      ::mixtrain::gpu::throw_cuda_error(mixtrain_status_, #call);             \
  } while (0)

// Evaluates a cuBLAS call; throws EngineError naming it on failure.
#define MIXTRAIN_CUBLAS_CHECK(call)                                           \
  do {                                                                        \
    const cublasStatus_t mixtrain_status_ = (call);                           \
    if (mixtrain_status_ != CUBLAS_STATUS_SUCCESS)                            \
      ::mixtrain::gpu::throw_cublas_error(mixtrain_status_, #call);           \
  } while (0)

// Placed right after a kernel launch: throws EngineError naming the kernel
// when the launch itself failed (bad configuration, no device code for this
// GPU). Faults inside the kernel surface at the next synchronizing call.
#define MIXTRAIN_CUDA_CHECK_LAUNCH(kernel_name)                               \
  do {                                                                        \
    const cudaError_t mixtrain_status_ = cudaGetLastError();                  \
    if (mixtrain_status_ != cudaSuccess)                                      \
      ::mixtrain::gpu::throw_cuda_error(mixtrain_status_,                     \
                                        "launch of " kernel_name);            \
  } while (0)
