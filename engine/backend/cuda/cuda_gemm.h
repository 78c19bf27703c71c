// Why: the cuBLAS calls behind matmul and the attention GEMMs: one
// cublasGemmStridedBatchedEx for plain products, and cuBLASLt for a linear
// layer whose bias (and GELU, as llm.c does) are fused into the GEMM's
// epilogue instead of costing passes of their own, and for the fp8 GEMM
// (per-tensor scales as cuBLASLt's scale pointers). The engine's matrices
// are row-major and cuBLAS's are column-major; a row-major X is the
// column-major X^T, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T
// by swapping the operands, with no copies.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include <array>
#include <cstdint>
#include <map>
#include <optional>

#include "engine/numerics/dtype.h"

namespace mixtrain::gpu {

// cuBLASLt's block-scaled fp8 GEMM (CUBLASLT_MATMUL_DESC_{A,B}_SCALE_MODE,
// CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0: MXFP8) came with cuBLAS 12.8,
// as PyTorch's and Transformer Engine's guards say. Built against an older
// toolkit, mixtrain leaves it out and MXFP8 GEMMs dequantize to bf16.
#if CUBLAS_VERSION >= 120800
inline constexpr bool kLtBlockScaledFp8 = true;
#else
inline constexpr bool kLtBlockScaledFp8 = false;
#endif

// A row-major matrix of a batched GEMM: element (r, c) of batch item i is
// at data + i * batch_stride + r * ld + c, counted in elements of dtype.
struct GemmOperand {
  const void* data;
  DType dtype;
  int64_t ld;            // elements between consecutive rows
  int64_t batch_stride;  // elements between consecutive batch items
  bool transposed;       // the product uses this matrix transposed
};

// cuBLASLt's algorithm for each linear-layer problem it was asked about
// (nullopt: it offered none). Its heuristic costs host time on every layer
// of every micro-batch, and its answer for a problem does not change. Used
// by one backend's ops, on one thread.
struct LtAlgorithms {
  // m, n, k, the three leading dimensions, the dtypes of A, B and C, both
  // transposes, the epilogue, TF32, fp8 block scaling, and the alignments
  // of cuBLASLt's A, B, C and D pointers (told to its heuristic).
  using Problem = std::array<int64_t, 18>;
  std::map<Problem, std::optional<cublasLtMatmulAlgo_t>> chosen;
};

// The cuBLAS handles a GEMM runs on (both bound to `stream`; cuBLASLt's
// calls get the workspace explicitly), whether fp32 inputs may be rounded
// to TF32 for tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32), and cuBLASLt's
// remembered algorithms.
struct Blas {
  cublasHandle_t handle;
  bool tf32 = false;
  cublasLtHandle_t lt = nullptr;
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  LtAlgorithms* lt_algorithms = nullptr;
};

struct GemmOutput {
  void* data;
  DType dtype;
  int64_t ld;
  int64_t batch_stride;
};

// For each of `batch` items: C (m,n) = alpha * op(A) (m,k) op(B) (k,n) +
// beta * C, accumulated in fp32 (fp32 inputs rounded to TF32 first when
// blas.tf32), enqueued on the handle's stream. A and B
// share one compute dtype and cublas_writes(A.dtype, C.dtype) holds (throws
// EngineError(kInvalidArgument) otherwise, or when a size exceeds int).
void gemm_row_major(const Blas& blas, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                    const GemmOperand& b, const GemmOutput& c, int64_t batch, float alpha,
                    float beta);

// What a linear layer's GEMM does in its epilogue.
struct LinearEpilogue {
  const void* bias = nullptr;  // (n), C's dtype: added to every row of C
  // (m, n), C's dtype and leading dimension: GELU (tanh approximation) of
  // the fp32 pre-activation, which C keeps (rounded) for the backward.
  void* gelu_out = nullptr;
  // (m), C's dtype: written (not added to) with the sums of op(A) (m,k)
  // over k, the bias gradient when A is a layer's output gradient
  // (CUBLASLT_EPILOGUE_BGRADB). Excludes bias and gelu_out.
  void* bias_grad = nullptr;
};

// The scales of an fp8 GEMM's operands, device pointers. Per tensor: one
// fp32 each, the factor that turns the codes into values (1/scale). With
// `blocks` (MXFP8, sm_100): each operand's E8M0 scales, a block of 32
// along k for each of its rows, in cuBLASLt's tiled layout
// (tile_mx_scales); k must then be a multiple of 32.
struct Fp8GemmScales {
  const void* a = nullptr;
  const void* b = nullptr;
  bool blocks = false;
};

// Bytes of the tiled layout of the block scales of a (rows, k) operand:
// 128 x 4 tiles of 512 bytes covering rows and k / 32 blocks.
int64_t tiled_mx_scale_bytes(int64_t rows, int64_t k);

// C (m,n) = alpha * op(A) op(B) + beta * C and then the epilogue, in one
// cuBLASLt GEMM on blas.stream (one batch item). A, B and C share one of
// fp32/fp16/bf16; or A and B are fp8 (not both E5M2) with `fp8` scales,
// C is fp32/fp16/bf16 and the layout is the one Ada's and Hopper's fp8
// kernels take, "TN": both operands with k contiguous (A not transposed,
// B transposed), so the product is (scale_a * A)(scale_b * B)^T.
// Returns false having enqueued nothing when cuBLASLt cannot run it: a
// pointer or a row off a 16-byte boundary, an fp8 k not a multiple of 16,
// a GELU output whose rows are not a multiple of 8 elements, or no
// algorithm offered; the caller then computes it another way. The
// algorithm is asked for once per problem when blas.lt_algorithms is set.
bool linear_row_major_lt(const Blas& blas, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                         const GemmOperand& b, const GemmOutput& c, float alpha, float beta,
                         const LinearEpilogue& epilogue, const Fp8GemmScales& fp8 = {});

}  // namespace mixtrain::gpu
