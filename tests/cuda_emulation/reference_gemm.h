// Why: what the stub cuBLAS (cublas_stub.cc) and the stub cuBLASLt
// (cublaslt_stub.cc) share: typed element access, a column-major operand,
// cuBLAS's table of type combinations, TF32 rounding, the check that no
// output element is written twice or is an input, and the fp32 dot
// product every output element is.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace stub {

inline bool is_fp8(cudaDataType type) { return type == CUDA_R_8F_E4M3 || type == CUDA_R_8F_E5M2; }

inline size_t element_size(cudaDataType type) {
  return type == CUDA_R_32F ? 4 : is_fp8(type) ? 1 : 2;
}

inline float load(const char* at, cudaDataType type) {
  switch (type) {
    case CUDA_R_8F_E4M3:
    case CUDA_R_8F_E5M2: {
      const auto bits = *reinterpret_cast<const __nv_fp8_storage_t*>(at);
      return __half2float(
          __half(__nv_cvt_fp8_to_halfraw(bits, type == CUDA_R_8F_E4M3 ? __NV_E4M3 : __NV_E5M2)));
    }
    case CUDA_R_16F: return __half2float(*reinterpret_cast<const __half*>(at));
    case CUDA_R_16BF: return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(at));
    default: return *reinterpret_cast<const float*>(at);
  }
}

inline void store(char* at, cudaDataType type, float value) {
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
inline bool supported_types(cublasComputeType_t compute, cudaDataType a, cudaDataType b,
                     cudaDataType c) {
  if (compute == CUBLAS_COMPUTE_32F_FAST_TF32) return a == CUDA_R_32F && b == a && c == a;
  const bool known = a == CUDA_R_32F || a == CUDA_R_16F || a == CUDA_R_16BF;
  return compute == CUBLAS_COMPUTE_32F && known && a == b &&
         (c == a || (c == CUDA_R_32F && a != CUDA_R_32F));
}

// x rounded to TF32 (10 significand bits), to nearest even; inf and NaN
// as they are.
inline float to_tf32(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) != 0x7f800000u) {
    bits += 0xfffu + ((bits >> 13) & 1u);
    bits &= ~0x1fffu;
  }
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

inline cublasStatus_t invalid(const char* why) {
  std::fprintf(stderr, "cuBLAS stub: CUBLAS_STATUS_INVALID_VALUE: %s\n", why);
  return CUBLAS_STATUS_INVALID_VALUE;
}

// Element (i, j) of item p of op(A) op(B), accumulated in fp32 over k (the
// inputs rounded to TF32 first when tf32).
inline float product(const Matrix& a, const Matrix& b, int p, int i, int j, int k, bool tf32) {
  float sum = 0.0f;
  for (int l = 0; l < k; ++l) {
    const float x = load(a.at(p, i, l), a.type), y = load(b.at(p, l, j), b.type);
    sum += tf32 ? to_tf32(x) * to_tf32(y) : x * y;
  }
  return sum;
}

// Why `outputs` (every element an output matrix writes) cannot be written:
// an element written twice, or one that op(A) (m,k) or op(B) (k,n) reads;
// nullptr when they can.
inline const char* overlap_problem(std::vector<const char*> outputs, const Matrix& a,
                                   const Matrix& b, int batch, int m, int n, int k) {
  std::sort(outputs.begin(), outputs.end());
  if (std::adjacent_find(outputs.begin(), outputs.end()) != outputs.end()) {
    return "output matrices overlap";
  }
  auto is_output = [&](const char* at) {
    return std::binary_search(outputs.begin(), outputs.end(), at);
  };
  for (int p = 0; p < batch; ++p)
    for (int l = 0; l < k; ++l) {
      for (int i = 0; i < m; ++i)
        if (is_output(a.at(p, i, l))) return "A overlaps an output";
      for (int j = 0; j < n; ++j)
        if (is_output(b.at(p, l, j))) return "B overlaps an output";
    }
  return nullptr;
}

}  // namespace stub
