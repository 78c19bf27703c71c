// Why: cuBLAS for the host emulation and the GEMM layout test: a naive
// column-major cublasGemmStridedBatchedEx (fp32 accumulation; with
// CUBLAS_COMPUTE_32F_FAST_TF32 the fp32 inputs rounded to TF32 first) that
// refuses what cuBLAS documents as invalid, so the row-major mapping in
// cuda_gemm.cc is checked against cuBLAS's rules and not only against the
// numbers: leading dimensions below the stored rows, type combinations
// that the compute type lacks, and outputs that overlap one another or
// the inputs. The product runs when the handle's stream gets there
// (stream_queues.h). It is not cuBLAS: its own kernels, algorithms,
// alignment rules and speed are not modelled.
#include <cublas_v2.h>

#include <algorithm>
#include <vector>

#include "reference_gemm.h"
#include "runtime_calls.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
};


extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t, void*, size_t) {
  return CUBLAS_STATUS_SUCCESS;
}
const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}
const char* cublasGetStatusString(cublasStatus_t status) { return cublasGetStatusName(status); }

cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t trans_a, cublasOperation_t trans_b, int m, int n,
    int k, const void* alpha, const void* a, cudaDataType a_type, int lda, long long stride_a,
    const void* b, cudaDataType b_type, int ldb, long long stride_b, const void* beta, void* c,
    cudaDataType c_type, int ldc, long long stride_c, int batch, cublasComputeType_t compute,
    cublasGemmAlgo_t) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!stub::supported_types(compute, a_type, b_type, c_type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool tf32 = compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  const bool ta = trans_a != CUBLAS_OP_N, tb = trans_b != CUBLAS_OP_N;
  if (m < 0 || n < 0 || k < 0 || batch < 0) return stub::invalid("negative size");
  // The stored rows of op(A) (m,k) and op(B) (k,n), as cuBLAS documents.
  if (lda < std::max(1, ta ? k : m)) return stub::invalid("lda below the rows of A");
  if (ldb < std::max(1, tb ? n : k)) return stub::invalid("ldb below the rows of B");
  if (ldc < std::max(1, m)) return stub::invalid("ldc below the rows of C");
  const stub::Matrix A{static_cast<const char*>(a), a_type, lda, stride_a, ta};
  const stub::Matrix B{static_cast<const char*>(b), b_type, ldb, stride_b, tb};
  const stub::Matrix C{static_cast<const char*>(c), c_type, ldc, stride_c, false};

  // Every output element once, no input element among them.
  std::vector<const char*> outputs;
  for (int p = 0; p < batch; ++p)
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) outputs.push_back(C.at(p, i, j));
  if (const char* problem = stub::overlap_problem(outputs, A, B, batch, m, n, k)) {
    return stub::invalid(problem);
  }

  // Run when the handle's stream gets there; alpha and beta are read now.
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  emu::enqueue_on(handle->stream, [=] {
    for (int p = 0; p < batch; ++p)
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
          const float sum = stub::product(A, B, p, i, j, k, tf32);
          char* out = const_cast<char*>(C.at(p, i, j));
          // beta == 0: C is not read (it may hold NaN), as in cuBLAS.
          stub::store(out, c_type, al * sum + (be != 0.0f ? be * stub::load(out, c_type) : 0.0f));
        }
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
