// Why: the one place that knows the engine's element types. Kernels are
// templated on a storage type and instantiated through dispatch_float(),
// so no other file switches over DType (TransformerEngine style).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/common/error.h"
#include "engine/numerics/float16.h"
#include "engine/numerics/fp8.h"

namespace mixtrain {

enum class DType : uint8_t {
  kF32,
  kF16,      // IEEE binary16
  kBF16,     // bfloat16
  kFP8E4M3,  // OCP E4M3: max 448, no infinities, NaN = S.1111.111
  kFP8E5M2,  // OCP E5M2: max 57344, IEEE-like infinities and NaNs
  kI32,      // token ids and targets
  kE8M0,     // OCP MX block scale: 2^(code - 127), 0xFF = NaN (mx_scaling.h)
};

// Bytes per element.
constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kFP8E4M3: return 1;
    case DType::kFP8E5M2: return 1;
    case DType::kI32: return 4;
    case DType::kE8M0:
      return 1;
  }
  return 0;
}

// "fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "int32", "e8m0" (the job
// spec's names).
const char* dtype_name(DType t);

// Inverse of dtype_name; also accepts "float32", "float16", "bfloat16".
// Throws EngineError(kInvalidArgument) naming the unknown string.
DType parse_dtype(std::string_view name);

// True for the two fp8 element formats.
constexpr bool is_fp8(DType t) { return t == DType::kFP8E4M3 || t == DType::kFP8E5M2; }

// The fp8 format of an fp8 dtype (E4M3 for kFP8E4M3, E5M2 otherwise).
constexpr Fp8Format fp8_format(DType t) {
  return t == DType::kFP8E4M3 ? Fp8Format::kE4M3 : Fp8Format::kE5M2;
}

// True for the types GEMMs and elementwise kernels compute in.
constexpr bool is_float_compute(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16;
}

// Calls f(T{}) with T = float, Half or BFloat16 according to `t`.
// Throws EngineError(kInvalidArgument) for any other dtype, naming `what`.
template <class F>
decltype(auto) dispatch_float(DType t, const char* what, F&& f) {
  switch (t) {
    case DType::kF32: return f(float{});
    case DType::kF16: return f(Half{});
    case DType::kBF16: return f(BFloat16{});
    default: break;
  }
  throw EngineError(ErrorCode::kInvalidArgument,
                    std::string(what) + ": dtype " + dtype_name(t) +
                        " is not one of fp32, fp16, bf16");
}

// The DType of a storage type: dtype_of<float>() == DType::kF32.
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::kF32; }
template <> constexpr DType dtype_of<Half>() { return DType::kF16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::kBF16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::kI32; }

}  // namespace mixtrain
