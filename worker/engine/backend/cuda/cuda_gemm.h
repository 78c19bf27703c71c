// Why: the one cuBLAS call behind matmul and the attention GEMMs. The
// engine's matrices are row-major and cuBLAS's are column-major; a
// row-major X is the column-major X^T, so C = op(A) op(B) is computed as
// C^T = op(B)^T op(A)^T by swapping the operands, with no copies.
#pragma once

#include <cublas_v2.h>

#include <cstdint>

#include "numerics/dtype.h"

namespace mixtrain::gpu {

// A row-major matrix of a batched GEMM: element (r, c) of batch item i is
// at data + i * batch_stride + r * ld + c, counted in elements of dtype.
struct GemmOperand {
  const void* data;
  DType dtype;
  int64_t ld;            // elements between consecutive rows
  int64_t batch_stride;  // elements between consecutive batch items
  bool transposed;       // the product uses this matrix transposed
};

// The cuBLAS handle a GEMM runs on and whether fp32 inputs may be rounded
// to TF32 for tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32).
struct Blas {
  cublasHandle_t handle;
  bool tf32 = false;
};

struct GemmOutput {
  void* data;
  DType dtype;
  int64_t ld;
  int64_t batch_stride;
};

// True when cuBLAS (fp32 compute) can write C of dtype `c` from A and B of
// dtype `ab`: the same dtype, or fp32 from fp16/bf16.
bool cublas_writes(DType ab, DType c);

// For each of `batch` items: C (m,n) = alpha * op(A) (m,k) op(B) (k,n) +
// beta * C, accumulated in fp32 (fp32 inputs rounded to TF32 first when
// blas.tf32), enqueued on the handle's stream. A and B
// share one compute dtype and cublas_writes(A.dtype, C.dtype) holds (throws
// EngineError(kInvalidArgument) otherwise, or when a size exceeds int).
void gemm_row_major(const Blas& blas, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                    const GemmOperand& b, const GemmOutput& c, int64_t batch, float alpha,
                    float beta);

}  // namespace mixtrain::gpu
