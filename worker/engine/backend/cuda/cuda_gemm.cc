// Why: maps a row-major batched GEMM onto cublasGemmStridedBatchedEx (see
// cuda_gemm.h for the operand swap) with fp32 compute for every input type.
#include "backend/cuda/cuda_gemm.h"

#include <algorithm>
#include <string>

#include "backend/cuda/cuda_error.h"
#include "backend/cuda/cuda_op_checks.h"

namespace mixtrain::gpu {
namespace {

cudaDataType cuda_data_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kF16: return CUDA_R_16F;
    case DType::kBF16: return CUDA_R_16BF;
    default: break;
  }
  throw EngineError(ErrorCode::kInvalidArgument,
                    std::string("gemm: dtype ") + dtype_name(dtype) + " is not fp32, fp16 or bf16");
}

cublasOperation_t cublas_op(bool transposed) { return transposed ? CUBLAS_OP_T : CUBLAS_OP_N; }

// cuBLAS wants every leading dimension >= 1, even for empty matrices.
int leading_dim(int64_t ld) { return checked_int("gemm", "leading dimension", std::max<int64_t>(ld, 1)); }

}  // namespace

bool cublas_writes(DType ab, DType c) {
  if (ab == c) return is_float_compute(ab);
  return c == DType::kF32 && (ab == DType::kF16 || ab == DType::kBF16);
}

void gemm_row_major(const Blas& blas, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                    const GemmOperand& b, const GemmOutput& c, int64_t batch, float alpha,
                    float beta) {
  MIXTRAIN_CHECK_ARG(a.dtype == b.dtype, std::string("gemm: A is ") + dtype_name(a.dtype) + " but B is " +
                                    dtype_name(b.dtype));
  MIXTRAIN_CHECK_ARG(cublas_writes(a.dtype, c.dtype), std::string("gemm: cuBLAS cannot write ") +
                                                 dtype_name(c.dtype) + " from " +
                                                 dtype_name(a.dtype) + " inputs");
  if (m == 0 || n == 0 || batch == 0) return;
  const cublasComputeType_t compute = blas.tf32 && a.dtype == DType::kF32
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  // Column-major view: C^T (n,m) = op(B)^T (n,k) op(A)^T (k,m).
  MIXTRAIN_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      blas.handle, cublas_op(b.transposed), cublas_op(a.transposed), checked_int("gemm", "n", n),
      checked_int("gemm", "m", m), checked_int("gemm", "k", k), &alpha, b.data,
      cuda_data_type(b.dtype), leading_dim(b.ld), b.batch_stride, a.data,
      cuda_data_type(a.dtype), leading_dim(a.ld), a.batch_stride, &beta, c.data,
      cuda_data_type(c.dtype), leading_dim(c.ld), c.batch_stride,
      checked_int("gemm", "batch", batch), compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace mixtrain::gpu
