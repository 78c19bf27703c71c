// Why: cuBLAS for the host emulation and the GEMM layout test: a naive
// column-major cublasGemmStridedBatchedEx (fp32 accumulation; with
// CUBLAS_COMPUTE_32F_FAST_TF32 the fp32 inputs rounded to TF32 first) that
// refuses what cuBLAS documents as invalid, so the row-major mapping in
// cuda_gemm.cc is checked against cuBLAS's rules and not only against the
// numbers: leading dimensions below the stored rows, type combinations
// that the compute type lacks, and outputs that overlap one another or
// the inputs. It is not cuBLAS: its own kernels, algorithms, alignment
// rules and speed are not modelled.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

struct cublasContext {
  cudaStream_t stream = nullptr;
};

namespace {

size_t element_size(cudaDataType type) { return type == CUDA_R_32F ? 4 : 2; }

float load(const char* at, cudaDataType type) {
  switch (type) {
    case CUDA_R_16F: return __half2float(*reinterpret_cast<const __half*>(at));
    case CUDA_R_16BF: return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(at));
    default: return *reinterpret_cast<const float*>(at);
  }
}

void store(char* at, cudaDataType type, float value) {
  switch (type) {
    case CUDA_R_16F: *reinterpret_cast<__half*>(at) = __float2half_rn(value); break;
    case CUDA_R_16BF:
      *reinterpret_cast<__nv_bfloat16*>(at) = __float2bfloat16_rn(value);
      break;
    default: *reinterpret_cast<float*>(at) = value; break;
  }
}

// One operand of a strided batched GEMM, column-major: element (r, c) of
// batch item p (after the operation op) is at index
// p * stride + (op == N ? r + c * ld : c + r * ld).
struct Matrix {
  const char* data;
  cudaDataType type;
  long long ld, stride;
  bool transposed;

  const char* at(int p, int r, int c) const {
    const long long index = p * stride + (transposed ? c + r * ld : r + c * ld);
    return data + index * static_cast<long long>(element_size(type));
  }
};

// The type combinations for A/B and C of cuBLAS's cublasGemmEx table:
// CUBLAS_COMPUTE_32F takes the same 32F, 16F or 16BF type, or 16F/16BF
// inputs with 32F C; CUBLAS_COMPUTE_32F_FAST_TF32 only 32F.
bool supported_types(cublasComputeType_t compute, cudaDataType a, cudaDataType b,
                     cudaDataType c) {
  if (compute == CUBLAS_COMPUTE_32F_FAST_TF32) return a == CUDA_R_32F && b == a && c == a;
  const bool known = a == CUDA_R_32F || a == CUDA_R_16F || a == CUDA_R_16BF;
  return compute == CUBLAS_COMPUTE_32F && known && a == b &&
         (c == a || (c == CUDA_R_32F && a != CUDA_R_32F));
}

// x rounded to TF32 (10 significand bits), to nearest even; inf and NaN
// as they are.
float to_tf32(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) != 0x7f800000u) {
    bits += 0xfffu + ((bits >> 13) & 1u);
    bits &= ~0x1fffu;
  }
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

cublasStatus_t invalid(const char* why) {
  std::fprintf(stderr, "cuBLAS stub: CUBLAS_STATUS_INVALID_VALUE: %s\n", why);
  return CUBLAS_STATUS_INVALID_VALUE;
}

}  // namespace

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
  if (!supported_types(compute, a_type, b_type, c_type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool tf32 = compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  const bool ta = trans_a != CUBLAS_OP_N, tb = trans_b != CUBLAS_OP_N;
  if (m < 0 || n < 0 || k < 0 || batch < 0) return invalid("negative size");
  // The stored rows of op(A) (m,k) and op(B) (k,n), as cuBLAS documents.
  if (lda < std::max(1, ta ? k : m)) return invalid("lda below the rows of A");
  if (ldb < std::max(1, tb ? n : k)) return invalid("ldb below the rows of B");
  if (ldc < std::max(1, m)) return invalid("ldc below the rows of C");
  const Matrix A{static_cast<const char*>(a), a_type, lda, stride_a, ta};
  const Matrix B{static_cast<const char*>(b), b_type, ldb, stride_b, tb};
  const Matrix C{static_cast<const char*>(c), c_type, ldc, stride_c, false};

  // Every output element once, no input element among them.
  std::vector<const char*> outputs;
  for (int p = 0; p < batch; ++p)
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) outputs.push_back(C.at(p, i, j));
  std::sort(outputs.begin(), outputs.end());
  if (std::adjacent_find(outputs.begin(), outputs.end()) != outputs.end()) {
    return invalid("output matrices overlap");
  }
  auto is_output = [&](const char* at) {
    return std::binary_search(outputs.begin(), outputs.end(), at);
  };
  for (int p = 0; p < batch; ++p)
    for (int l = 0; l < k; ++l) {
      for (int i = 0; i < m; ++i)
        if (is_output(A.at(p, i, l))) return invalid("A overlaps C");
      for (int j = 0; j < n; ++j)
        if (is_output(B.at(p, l, j))) return invalid("B overlaps C");
    }

  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  for (int p = 0; p < batch; ++p)
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        float sum = 0.0f;
        for (int l = 0; l < k; ++l) {
          const float x = load(A.at(p, i, l), a_type), y = load(B.at(p, l, j), b_type);
          sum += tf32 ? to_tf32(x) * to_tf32(y) : x * y;
        }
        char* out = const_cast<char*>(C.at(p, i, j));
        // beta == 0: C is not read (it may hold NaN), as in cuBLAS.
        store(out, c_type, al * sum + (be != 0.0f ? be * load(out, c_type) : 0.0f));
      }
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
