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

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "engine/backend/tensor.h"
#include "engine/numerics/dtype.h"

namespace mixtrain::gpu {

// fp8 elements: raw bytes, the format is in the type.
struct Fp8E4M3 {
  __nv_fp8_storage_t bits;
};
struct Fp8E5M2 {
  __nv_fp8_storage_t bits;
};

// Calls f(T{}) with T = Fp8E4M3 or Fp8E5M2 for an fp8 dtype.
template <class F>
void dispatch_fp8(DType dtype, F&& f) {
  if (dtype == DType::kFP8E4M3) {
    f(Fp8E4M3{});
  } else {
    f(Fp8E5M2{});
  }
}

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

// ---- packs: W consecutive elements in one memory access -------------------
// Memory-bound kernels reach the GPU's bandwidth with 128-bit accesses;
// element by element a 16-bit tensor is read 2 bytes per instruction.
template <class T, int W> struct alignas(sizeof(T) * W) Pack {
  T v[W];
};
template <int W, class T> __device__ inline void load_pack(const T* data, int64_t i, float (&out)[W]) {
  const Pack<T, W> pack = *reinterpret_cast<const Pack<T, W>*>(data + i);
  for (int j = 0; j < W; ++j) out[j] = to_f32(pack.v[j]);
}
template <int W, class T> __device__ inline void store_pack(T* data, int64_t i, const float (&in)[W]) {
  Pack<T, W> pack;
  for (int j = 0; j < W; ++j) pack.v[j] = from_f32<T>(in[j]);
  *reinterpret_cast<Pack<T, W>*>(data + i) = pack;
}

// ---- accessors ------------------------------------------------------------
// Elements of a tensor whose dtype T is known at compile time.
template <class T> struct Typed {
  T* data;
  __device__ float load(int64_t i) const { return to_f32(data[i]); }
  __device__ void store(int64_t i, float value) const { data[i] = from_f32<T>(value); }
  // Elements i .. i+W-1 in one access: data + i must be aligned to W
  // elements (vector_width() checks the tensors).
  template <int W> __device__ void load_pack(int64_t i, float (&out)[W]) const {
    gpu::load_pack<W>(data, i, out);
  }
  template <int W> __device__ void store_pack(int64_t i, const float (&in)[W]) const {
    gpu::store_pack<W>(data, i, in);
  }
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
  // Element by element: mixed dtypes are never packed (kPackWidth is 1).
  template <int W> __device__ void load_pack(int64_t i, float (&out)[W]) const {
    for (int j = 0; j < W; ++j) out[j] = load(i + j);
  }
  template <int W> __device__ void store_pack(int64_t i, const float (&in)[W]) const {
    for (int j = 0; j < W; ++j) store(i + j, in[j]);
  }
};

// The CUDA element type of a numerics/ storage type.
template <class T> struct CudaElement { using type = T; };
template <> struct CudaElement<Half> { using type = __half; };
template <> struct CudaElement<BFloat16> { using type = __nv_bfloat16; };

// Accessor policies: Ref is the accessor type, ref() makes one for a tensor,
// kPackWidth the elements of one 16-byte access.
template <class T> struct SameDtype {
  using Ref = Typed<T>;
  static constexpr int kPackWidth = 16 / sizeof(T);
  static Ref ref(const Tensor& t) { return {static_cast<T*>(t.data())}; }
  // An accessor for an absent optional tensor (never dereferenced).
  static Ref none() { return {nullptr}; }
};
struct MixedDtypes {
  using Ref = AnyCompute;
  static constexpr int kPackWidth = 1;
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

// Calls f(std::integral_constant<int, W>{}) with W = kMaxWidth when every
// non-null tensor in `tensors` starts on a boundary of kMaxWidth of its
// elements (views at other offsets exist), else W = 1: the pack width of a
// kernel templated on it.
template <int kMaxWidth, class F>
void dispatch_pack_width(std::initializer_list<const Tensor*> tensors, F&& f) {
  bool aligned = true;
  for (const Tensor* t : tensors) {
    if (t == nullptr) continue;
    const auto address = reinterpret_cast<uintptr_t>(t->data());
    aligned = aligned && address % (kMaxWidth * dtype_size(t->dtype())) == 0;
  }
  if (aligned) {
    f(std::integral_constant<int, kMaxWidth>{});
  } else {
    f(std::integral_constant<int, 1>{});
  }
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
