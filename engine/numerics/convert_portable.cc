// Why: the conversion loops for CPUs without AVX2 + F16C: the scalar
// functions of float16.h / fp8.h in a loop, so they match them by
// construction. MIXTRAIN_MULTIVERSION lets the compiler vectorize what it
// can per ISA.
#include <cstring>

#include "engine/common/cpu_features.h"
#include "engine/numerics/convert_kernels.h"
#include "engine/numerics/float16.h"
#include "engine/numerics/fp8.h"

namespace mixtrain::convert_detail {
namespace {

// Elements are read and written with memcpy: callers may pass pointers
// that are not aligned to the element size.
template <class Bits>
Bits load_bits(const void* base, size_t i) {
  Bits bits;
  std::memcpy(&bits, static_cast<const char*>(base) + i * sizeof(Bits), sizeof(Bits));
  return bits;
}

template <class Bits>
void store_bits(void* base, size_t i, Bits bits) {
  std::memcpy(static_cast<char*>(base) + i * sizeof(Bits), &bits, sizeof(Bits));
}

MIXTRAIN_MULTIVERSION void f16_to_f32(const void* src, void* dst, size_t n) {
  for (size_t i = 0; i < n; ++i)
    store_bits(dst, i, half_bits_to_float(load_bits<uint16_t>(src, i)));
}

MIXTRAIN_MULTIVERSION void bf16_to_f32(const void* src, void* dst, size_t n) {
  for (size_t i = 0; i < n; ++i)
    store_bits(dst, i, bf16_bits_to_float(load_bits<uint16_t>(src, i)));
}

MIXTRAIN_MULTIVERSION void e4m3_to_f32(const void* src, void* dst, size_t n) {
  const auto* codes = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n; ++i) store_bits(dst, i, fp8_to_float(codes[i], Fp8Format::kE4M3));
}

MIXTRAIN_MULTIVERSION void e5m2_to_f32(const void* src, void* dst, size_t n) {
  const auto* codes = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n; ++i) store_bits(dst, i, fp8_to_float(codes[i], Fp8Format::kE5M2));
}

MIXTRAIN_MULTIVERSION void f32_to_f16(const void* src, void* dst, size_t n, bool) {
  for (size_t i = 0; i < n; ++i)
    store_bits<uint16_t>(dst, i, float_to_half_bits(load_bits<float>(src, i)));
}

MIXTRAIN_MULTIVERSION void f32_to_bf16(const void* src, void* dst, size_t n, bool) {
  for (size_t i = 0; i < n; ++i)
    store_bits<uint16_t>(dst, i, float_to_bf16_bits(load_bits<float>(src, i)));
}

MIXTRAIN_MULTIVERSION void f32_to_e4m3(const void* src, void* dst, size_t n, bool saturate_fp8) {
  auto* codes = static_cast<uint8_t*>(dst);
  for (size_t i = 0; i < n; ++i) {
    codes[i] = float_to_fp8(load_bits<float>(src, i), Fp8Format::kE4M3, saturate_fp8);
  }
}

MIXTRAIN_MULTIVERSION void f32_to_e5m2(const void* src, void* dst, size_t n, bool saturate_fp8) {
  auto* codes = static_cast<uint8_t*>(dst);
  for (size_t i = 0; i < n; ++i) {
    codes[i] = float_to_fp8(load_bits<float>(src, i), Fp8Format::kE5M2, saturate_fp8);
  }
}

}  // namespace

const ConvertKernels& portable_kernels() {
  static constexpr ConvertKernels kernels{f16_to_f32, bf16_to_f32, e4m3_to_f32, e5m2_to_f32,
                                          f32_to_f16, f32_to_bf16, f32_to_e4m3, f32_to_e5m2};
  return kernels;
}

}  // namespace mixtrain::convert_detail
