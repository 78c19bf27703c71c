// Why: maps a row-major batched GEMM onto cublasGemmStridedBatchedEx, and a
// linear layer with its epilogue (16-bit, fp32 or fp8 inputs) onto
// cublasLtMatmul (see cuda_gemm.h for the operand swap), with fp32 compute
// for every input type.
#include "engine/backend/cuda/cuda_gemm.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "engine/backend/cuda/cuda_error.h"
#include "engine/backend/cuda/cuda_op_checks.h"
#include "engine/backend/cuda_workspace.h"
#include "engine/numerics/mx_scaling.h"

namespace mixtrain::gpu {
namespace {

cudaDataType cuda_data_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kF16: return CUDA_R_16F;
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kFP8E4M3:
      return CUDA_R_8F_E4M3;
    case DType::kFP8E5M2:
      return CUDA_R_8F_E5M2;
    default: break;
  }
  throw EngineError(ErrorCode::kInvalidArgument, std::string("gemm: dtype ") + dtype_name(dtype) +
                                                     " is not fp32, fp16, bf16 or fp8");
}

cublasOperation_t cublas_op(bool transposed) { return transposed ? CUBLAS_OP_T : CUBLAS_OP_N; }

// cuBLAS wants every leading dimension >= 1, even for empty matrices.
int leading_dim(int64_t ld) { return checked_int("gemm", "leading dimension", std::max<int64_t>(ld, 1)); }

cublasComputeType_t compute_type(const Blas& blas, DType dtype) {
  return blas.tf32 && dtype == DType::kF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

bool on_16_bytes(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The alignment cuBLASLt may assume of `p`: the largest power of two up to
// 256 dividing its address. Untold, its heuristic assumes 256 bytes and
// may pick a kernel that faults on, or refuses, a 128-byte-aligned view
// (a GPT-2 XL weight, dim 1600 in bf16, sits at multiples of 3200 bytes).
uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

bool rows_on_16_bytes(const GemmOperand& x) {
  return (x.ld * static_cast<int64_t>(dtype_size(x.dtype))) % 16 == 0;
}

// The argument checks of an fp8 GEMM (see linear_row_major_lt).
void check_fp8_gemm(const GemmOperand& a, const GemmOperand& b, const GemmOutput& c,
                    const Fp8GemmScales& fp8) {
  MIXTRAIN_CHECK_ARG(fp8.a != nullptr && fp8.b != nullptr,
                     "linear: fp8 operands need both scale pointers");
  MIXTRAIN_CHECK_ARG(!(a.dtype == DType::kFP8E5M2 && b.dtype == DType::kFP8E5M2),
                     "linear: cuBLASLt has no fp8 GEMM of two E5M2 operands");
  MIXTRAIN_CHECK_ARG(is_float_compute(c.dtype), std::string("linear: fp8 GEMM output is ") +
                                                    dtype_name(c.dtype) +
                                                    ", expected fp32, fp16 or bf16");
  MIXTRAIN_CHECK_ARG(!a.transposed && b.transposed,
                     "linear: fp8 GEMMs take A (m,k) and B stored (n,k), k contiguous in both "
                     "(cuBLASLt's TN layout)");
}
// cuBLASLt's descriptors, destroyed with the GEMM call that used them.
struct LtDescriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~LtDescriptors() {
    if (preference != nullptr) cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t layout : {a, b, c})
      if (layout != nullptr) cublasLtMatrixLayoutDestroy(layout);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

template <class T> void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                            const T& value) {
  MIXTRAIN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value));
}

// The column-major layout of a row-major operand that enters the product
// (transposed or not) with `rows` x `cols` elements as cuBLAS sees them.
cublasLtMatrixLayout_t layout_of(DType dtype, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  MIXTRAIN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, cuda_data_type(dtype),
                                                   static_cast<uint64_t>(rows),
                                                   static_cast<uint64_t>(cols), leading_dim(ld)));
  return layout;
}

}  // namespace

int64_t tiled_mx_scale_bytes(int64_t rows, int64_t k) {
  const int64_t blocks = (k + kMxBlockSize - 1) / kMxBlockSize;
  return (rows + 127) / 128 * ((blocks + 3) / 4) * 512;
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
  const cublasComputeType_t compute = compute_type(blas, a.dtype);
  // Column-major view: C^T (n,m) = op(B)^T (n,k) op(A)^T (k,m).
  MIXTRAIN_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      blas.handle, cublas_op(b.transposed), cublas_op(a.transposed), checked_int("gemm", "n", n),
      checked_int("gemm", "m", m), checked_int("gemm", "k", k), &alpha, b.data,
      cuda_data_type(b.dtype), leading_dim(b.ld), b.batch_stride, a.data,
      cuda_data_type(a.dtype), leading_dim(a.ld), a.batch_stride, &beta, c.data,
      cuda_data_type(c.dtype), leading_dim(c.ld), c.batch_stride,
      checked_int("gemm", "batch", batch), compute, CUBLAS_GEMM_DEFAULT));
}

bool linear_row_major_lt(const Blas& blas, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                         const GemmOperand& b, const GemmOutput& c, float alpha, float beta,
                         const LinearEpilogue& epilogue, const Fp8GemmScales& fp8) {
  MIXTRAIN_CHECK_ARG(epilogue.bias_grad == nullptr ||
                         (epilogue.bias == nullptr && epilogue.gelu_out == nullptr),
                     "linear: a bias gradient epilogue excludes bias and GELU");
  const bool fp8_inputs = is_fp8(a.dtype) && is_fp8(b.dtype);
  if (fp8_inputs) {
    check_fp8_gemm(a, b, c, fp8);
  } else {
    MIXTRAIN_CHECK_ARG(a.dtype == b.dtype && b.dtype == c.dtype && is_float_compute(a.dtype),
                       std::string("linear: A, B and C are ") + dtype_name(a.dtype) + ", " +
                           dtype_name(b.dtype) + " and " + dtype_name(c.dtype) +
                           " (cuBLASLt's fused linear takes one of fp32, fp16, bf16, or fp8 "
                           "inputs)");
  }
  const int64_t element = static_cast<int64_t>(dtype_size(c.dtype));
  const bool aligned = on_16_bytes(a.data) && on_16_bytes(b.data) && on_16_bytes(c.data) &&
                       on_16_bytes(epilogue.bias) && on_16_bytes(epilogue.gelu_out) &&
                       on_16_bytes(epilogue.bias_grad) && rows_on_16_bytes(a) &&
                       rows_on_16_bytes(b) && (c.ld * element) % 16 == 0 &&
                       (!fp8_inputs || k % (fp8.blocks ? kMxBlockSize : 16) == 0);
  if (!aligned || blas.lt == nullptr || m == 0 || n == 0 || k == 0) return false;
  // AUX_LD's rule; and C, read for beta, cannot also be the aux output.
  if (epilogue.gelu_out != nullptr && (c.ld % 8 != 0 || beta != 0.0f)) return false;

  // Column-major: D (n,m) = op(B)^T (n,k) op(A)^T (k,m), the operands
  // swapped; a transposed operand is stored with its dimensions swapped.
  LtDescriptors d;
  MIXTRAIN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d.op, compute_type(blas, a.dtype), CUDA_R_32F));
  set(d.op, CUBLASLT_MATMUL_DESC_TRANSA, cublas_op(b.transposed));
  set(d.op, CUBLASLT_MATMUL_DESC_TRANSB, cublas_op(a.transposed));
  if (fp8_inputs) {  // cuBLASLt's A is our B
    set(d.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, fp8.b);
    set(d.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, fp8.a);
    if (fp8.blocks) {
#if CUBLAS_VERSION >= 120800  // kLtBlockScaledFp8
      const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
      set(d.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, mode);
      set(d.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, mode);
#else
      return false;
#endif
    }
  }
  const int32_t type = cuda_data_type(c.dtype);
  cublasLtEpilogue_t kind = CUBLASLT_EPILOGUE_DEFAULT;
  if (epilogue.gelu_out != nullptr) {
    kind = epilogue.bias != nullptr ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    set(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, c.data);  // C keeps the pre-activation
    set(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, c.ld);
    set(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, type);
  } else if (epilogue.bias != nullptr) {
    kind = CUBLASLT_EPILOGUE_BIAS;
  } else if (epilogue.bias_grad != nullptr) {
    // Our A is cuBLASLt's B: its columns are D's, summed over k.
    kind = CUBLASLT_EPILOGUE_BGRADB;
  }
  set(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, kind);
  if (const void* vector = epilogue.bias != nullptr ? epilogue.bias : epilogue.bias_grad) {
    set(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, vector);
    set(d.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, type);
  }
  d.a = b.transposed ? layout_of(b.dtype, k, n, b.ld) : layout_of(b.dtype, n, k, b.ld);
  d.b = a.transposed ? layout_of(a.dtype, m, k, a.ld) : layout_of(a.dtype, k, m, a.ld);
  d.c = layout_of(c.dtype, n, m, c.ld);
  // With GELU the epilogue's output D is gelu_out; C is read (beta) and
  // receives the pre-activation through the auxiliary pointer.
  void* d_out = epilogue.gelu_out != nullptr ? epilogue.gelu_out : c.data;
  // cuBLASLt's A is our B. An algorithm is kept per alignment too: one
  // chosen for 256-byte pointers must not run on 128-byte ones.
  const std::array<uint32_t, 4> alignments{alignment_of(b.data), alignment_of(a.data),
                                           alignment_of(c.data), alignment_of(d_out)};
  const LtAlgorithms::Problem problem{m,
                                      n,
                                      k,
                                      a.ld,
                                      b.ld,
                                      c.ld,
                                      static_cast<int64_t>(a.dtype),
                                      static_cast<int64_t>(b.dtype),
                                      static_cast<int64_t>(c.dtype),
                                      a.transposed,
                                      b.transposed,
                                      static_cast<int64_t>(kind),
                                      blas.tf32,
                                      fp8.blocks,
                                      alignments[0],
                                      alignments[1],
                                      alignments[2],
                                      alignments[3]};
  LtAlgorithms* known = blas.lt_algorithms;
  std::optional<cublasLtMatmulAlgo_t> algorithm;
  if (known != nullptr && known->chosen.contains(problem)) {
    algorithm = known->chosen.at(problem);
  } else {
    MIXTRAIN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&d.preference));
    const uint64_t workspace = blas.workspace_bytes;
    MIXTRAIN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));
    constexpr cublasLtMatmulPreferenceAttributes_t kAlignment[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (size_t i = 0; i < alignments.size(); ++i) {
      MIXTRAIN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
          d.preference, kAlignment[i], &alignments[i], sizeof alignments[i]));
    }
    cublasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    if (cublasLtMatmulAlgoGetHeuristic(blas.lt, d.op, d.a, d.b, d.c, d.c, d.preference, 1,
                                       &heuristic, &found) == CUBLAS_STATUS_SUCCESS &&
        found > 0) {
      algorithm = heuristic.algo;
    }
    if (known != nullptr) known->chosen.emplace(problem, algorithm);
  }
  if (!algorithm) return false;
  MIXTRAIN_CUBLAS_CHECK(cublasLtMatmul(blas.lt, d.op, &alpha, b.data, d.a, a.data, d.b, &beta,
                                       c.data, d.c, d_out, d.c, &*algorithm, blas.workspace,
                                       blas.workspace_bytes, blas.stream));
  return true;
}

}  // namespace mixtrain::gpu
