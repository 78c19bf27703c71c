// Why: builds the EngineError messages for failed CUDA and cuBLAS calls in
// one place, so every message names the call and the library's own words.
#include "engine/backend/cuda/cuda_error.h"

#include <string>

namespace mixtrain::gpu {

void throw_cuda_error(cudaError_t status, const char* call) {
  // A failed call also becomes the thread's "last error"; clear it so the
  // next launch check does not report this failure a second time.
  (void)cudaGetLastError();
  ErrorCode code = ErrorCode::kInternal;
  if (status == cudaErrorMemoryAllocation) code = ErrorCode::kOutOfMemory;
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver ||
      status == cudaErrorInvalidDevice) {
    code = ErrorCode::kUnavailable;
  }
  throw EngineError(code, std::string("CUDA call failed: ") + call + ": " +
                              cudaGetErrorName(status) + " (" + cudaGetErrorString(status) +
                              ")");
}

void throw_cublas_error(cublasStatus_t status, const char* call) {
  const ErrorCode code =
      status == CUBLAS_STATUS_ALLOC_FAILED ? ErrorCode::kOutOfMemory : ErrorCode::kInternal;
  throw EngineError(code, std::string("cuBLAS call failed: ") + call + ": " +
                              cublasGetStatusName(status) + " (" +
                              cublasGetStatusString(status) + ")");
}

}  // namespace mixtrain::gpu
