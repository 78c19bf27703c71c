// Why: the one place the CUDA kernels learn element types (the CUDA side of
// numerics/dtype.h's dispatch_float). Kernels are templated on an element
// accessor and read/write every element as fp32 through it; the host picks
// the accessor here, once per op:
//  * all of an op's compute tensors share a dtype T (the normal mixed-
//    precision case): Typed<T>, compiled for exactly that type;
//  * they differ (allowed by backend.h): AnyCompute, which switches on the
//    dtype per element, so mixed calls work without compiling every
//    combination of types.
// Conversions use CUDA's own intrinsics (__float2half_rn,
// __float2bfloat16_rn, __nv_cvt_float_to_fp8 with __NV_SATFINITE), the
// reference that the CPU scalars in float16.h and fp8.h were written to
// match bit for bit.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <initializer_list>
#include <string>

#include "backend/tensor.h"
#include "numerics/dtype.h"

namespace mixtrain::gpu {

// fp8 elements: raw bytes, the format is in the type.
struct Fp8E4M3 {
  __nv_fp8_storage_t bits;
};
struct Fp8E5M2 {
  __nv_fp8_storage_t bits;
};

// ---- element -> fp32 (exact for every type) -------------------------------
__device__ inline float to_f32(float x) { return x; }
__device__ inline float to_f32(__half x) {
  const unsigned short bits = __half_as_ushort(x);
  if ((bits & 0x7fffu) > 0x7c00u) {
    // NaN: keep sign and payload and set the quiet bit, as x86 F16C and
    // the CPU scalar half_bits_to_float do.
    const unsigned int f = (static_cast<unsigned int>(bits & 0x8000u) << 16) | 0x7fc00000u |
                           (static_cast<unsigned int>(bits & 0x3ffu) << 13);
    return __uint_as_float(f);
  }
  return __half2float(x);
}
__device__ inline float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline float to_f32(Fp8E4M3 x) {
  return to_f32(__half(__nv_cvt_fp8_to_halfraw(x.bits, __NV_E4M3)));
}
__device__ inline float to_f32(Fp8E5M2 x) {
  return to_f32(__half(__nv_cvt_fp8_to_halfraw(x.bits, __NV_E5M2)));
}

// ---- fp32 -> element (round to nearest even; fp8 saturates) ---------------
template <class T> __device__ T from_f32(float x);
template <> __device__ inline float from_f32<float>(float x) { return x; }
template <> __device__ inline __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ inline __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ inline Fp8E4M3 from_f32<Fp8E4M3>(float x) {
  return {__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)};
}
template <> __device__ inline Fp8E5M2 from_f32<Fp8E5M2>(float x) {
  return {__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2)};
}

// ---- accessors ------------------------------------------------------------
// Elements of a tensor whose dtype T is known at compile time.
template <class T> struct Typed {
  T* data;
  __device__ float load(int64_t i) const { return to_f32(data[i]); }
  __device__ void store(int64_t i, float value) const { data[i] = from_f32<T>(value); }
};

// Elements of a tensor of any compute dtype, chosen at run time.
struct AnyCompute {
  void* data;
  DType dtype;
  __device__ float load(int64_t i) const {
    switch (dtype) {
      case DType::kF16: return to_f32(static_cast<const __half*>(data)[i]);
      case DType::kBF16: return to_f32(static_cast<const __nv_bfloat16*>(data)[i]);
      default: return static_cast<const float*>(data)[i];
    }
  }
  __device__ void store(int64_t i, float value) const {
    switch (dtype) {
      case DType::kF16: static_cast<__half*>(data)[i] = from_f32<__half>(value); break;
      case DType::kBF16:
        static_cast<__nv_bfloat16*>(data)[i] = from_f32<__nv_bfloat16>(value);
        break;
      default: static_cast<float*>(data)[i] = value; break;
    }
  }
};

// The CUDA element type of a numerics/ storage type.
template <class T> struct CudaElement { using type = T; };
template <> struct CudaElement<Half> { using type = __half; };
template <> struct CudaElement<BFloat16> { using type = __nv_bfloat16; };

// Accessor policies: Ref is the accessor type, ref() makes one for a tensor.
template <class T> struct SameDtype {
  using Ref = Typed<T>;
  static Ref ref(const Tensor& t) { return {static_cast<T*>(t.data())}; }
  // An accessor for an absent optional tensor (never dereferenced).
  static Ref none() { return {nullptr}; }
};
struct MixedDtypes {
  using Ref = AnyCompute;
  static Ref ref(const Tensor& t) { return {t.data(), t.dtype()}; }
  static Ref none() { return {nullptr, DType::kF32}; }
};

// Calls f(Policy{}) with SameDtype<T> when every non-null tensor in
// `tensors` has compute dtype T, MixedDtypes when they differ. Throws
// EngineError(kInvalidArgument) naming `op` and the tensor when one is not
// fp32, fp16 or bf16.
template <class F>
void dispatch_compute(std::initializer_list<const Tensor*> tensors, const char* op, F&& f) {
  const Tensor* first = nullptr;
  bool same = true;
  for (const Tensor* t : tensors) {
    if (t == nullptr) continue;
    MIXTRAIN_CHECK_ARG(is_float_compute(t->dtype()),
              std::string(op) + ": " + t->describe() + " is not fp32, fp16 or bf16");
    if (first == nullptr) first = t;
    same = same && t->dtype() == first->dtype();
  }
  MIXTRAIN_CHECK_ARG(first != nullptr, std::string(op) + ": no tensor to dispatch on");
  if (!same) {
    f(MixedDtypes{});
    return;
  }
  dispatch_float(first->dtype(), op, [&](auto tag) {
    f(SameDtype<typename CudaElement<decltype(tag)>::type>{});
  });
}

// Calls f(T{}) with T the CUDA element type of `dtype`, for every float
// dtype including the fp8 ones (cast's operands). Throws
// EngineError(kInvalidArgument) naming `op` for int32.
template <class F> void dispatch_any_float(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::kFP8E4M3: f(Fp8E4M3{}); return;
    case DType::kFP8E5M2: f(Fp8E5M2{}); return;
    default:
      dispatch_float(dtype, op, [&](auto tag) { f(typename CudaElement<decltype(tag)>::type{}); });
  }
}

}  // namespace mixtrain::gpu
