// Why: the two OCP fp8 formats, scalar and exact, inline so that CPU loops
// (and convert()'s portable path) can be vectorized by the compiler. They
// work on fp32 bit patterns, so the FPU's rounding mode and FTZ/DAZ flags
// cannot change a result. Rounding is to nearest even with subnormals
// kept, matching CUDA's __nv_cvt_float_to_fp8:
//  E4M3 (bias 7): max 448 (S.1111.110), no infinities, NaN = S.1111.111.
//  E5M2 (bias 15): max 57344, +-inf = S.11111.00, NaNs S.11111.{01,10,11}.
// Overflow starts at max + half an ulp where that tie rounds away from max:
// |x| > 464 for E4M3 (464 ties to even, 448), |x| >= 61440 for E5M2.
// Saturating mode (default) sends out-of-range values and +-inf to +-max;
// non-saturating sends them to NaN (E4M3 S.1111.111) or +-inf (E5M2).
// A NaN input of either sign becomes the canonical 0x7F (E4M3 0.1111.111,
// E5M2 0.11111.11), as CUDA returns, like the canonical 0x7FFF of fp16 and
// bf16. |x| <= half the smallest subnormal becomes +-0 (sign kept).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "engine/numerics/float16.h"

namespace mixtrain {

enum class Fp8Format { kE4M3, kE5M2 };

inline constexpr float kFp8E4M3Max = 448.0f;
inline constexpr float kFp8E5M2Max = 57344.0f;

// The largest finite value of a format: 448 (E4M3) or 57344 (E5M2).
inline constexpr float fp8_max(Fp8Format format) {
  return format == Fp8Format::kE4M3 ? kFp8E4M3Max : kFp8E5M2Max;
}

namespace fp8_detail {

// What distinguishes the two formats when rounding from fp32.
struct Encoding {
  uint32_t mantissa_bits;         // 3 (E4M3) or 2 (E5M2)
  uint32_t min_normal_bits;       // fp32 bits of the smallest normal fp8
  uint32_t overflow_bits;         // |x| bits at and above which x overflows
  uint32_t exponent_rebias;       // (127 - fp8 bias) << 23
  uint32_t subnormal_shift_base;  // right shift of the significand = base - fp32 exponent
  uint32_t max_code;              // largest finite magnitude
  uint32_t overflow_code;         // non-saturating overflow: NaN (E4M3) or inf (E5M2)
  uint32_t nan_code;              // what a NaN input becomes (no sign)
};

inline constexpr Encoding kE4M3{.mantissa_bits = 3,
                                .min_normal_bits = 0x3c800000u,  // 2^-6
                                .overflow_bits = 0x43e80001u,    // the float after 464
                                .exponent_rebias = 120u << 23,
                                .subnormal_shift_base = 141u,
                                .max_code = 0x7eu,
                                .overflow_code = 0x7fu,
                                .nan_code = 0x7fu};
inline constexpr Encoding kE5M2{.mantissa_bits = 2,
                                .min_normal_bits = 0x38800000u,  // 2^-14
                                .overflow_bits = 0x47700000u,    // 61440
                                .exponent_rebias = 112u << 23,
                                .subnormal_shift_base = 134u,
                                .max_code = 0x7bu,
                                .overflow_code = 0x7cu,
                                .nan_code = 0x7fu};

// Every case is computed and the right one selected, without branches, so
// loops over it vectorize.
inline uint8_t encode(float x, const Encoding& e, bool saturate) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  uint32_t sign = (bits >> 24) & 0x80u;
  uint32_t ax = bits & 0x7fffffffu;
  // Normal range: round the dropped fp32 mantissa bits to nearest even.
  uint32_t drop = 23u - e.mantissa_bits;
  uint32_t rounded = ax + (1u << (drop - 1u)) - 1u + ((ax >> drop) & 1u);
  uint32_t normal = (rounded - e.exponent_rebias) >> drop;
  // Subnormal range: the value in units of the smallest subnormal is
  // significand * 2^-shift, rounded to nearest even; shifts past 24 give 0,
  // and a round-up out of the top subnormal lands on the smallest normal.
  // (Computed from |x| capped at the smallest normal, so shift is 20..31.)
  uint32_t tiny = std::min(ax, e.min_normal_bits);
  uint32_t shift = std::min(e.subnormal_shift_base - (tiny >> 23), 31u);
  uint32_t significand = (tiny & 0x7fffffu) | 0x800000u;
  uint32_t subnormal =
      (significand + (1u << (shift - 1u)) - 1u + ((significand >> shift) & 1u)) >> shift;
  // Overflow, +-inf and NaN all have |x| >= overflow_bits.
  uint32_t overflow = saturate ? e.max_code : e.overflow_code;
  uint32_t finite = ax < e.min_normal_bits ? subnormal : normal;
  uint32_t code = sign | (ax >= e.overflow_bits ? overflow : finite);
  return static_cast<uint8_t>(ax > 0x7f800000u ? e.nan_code : code);
}

// E4M3 has no infinities; S.1111.111 is its only NaN.
inline float decode_e4m3(uint8_t code) {
  uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  uint32_t exponent = (code >> 3) & 0xfu;
  uint32_t mantissa = code & 0x7u;
  uint32_t bits;
  if (exponent == 0xfu && mantissa == 0x7u) {
    bits = sign | 0x7fc00000u;
  } else if (exponent != 0) {
    bits = sign | ((exponent + 120u) << 23) | (mantissa << 20);
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    // mantissa * 2^-9 with its top set bit at position p (0..2).
    uint32_t p = 31u - static_cast<uint32_t>(std::countl_zero(mantissa));
    bits = sign | ((p + 118u) << 23) | ((mantissa << (23u - p)) & 0x7fffffu);
  }
  return std::bit_cast<float>(bits);
}

}  // namespace fp8_detail

// fp32 -> fp8 as described at the top of this file.
inline uint8_t float_to_fp8(float x, Fp8Format format, bool saturate = true) {
  return format == Fp8Format::kE4M3 ? fp8_detail::encode(x, fp8_detail::kE4M3, saturate)
                                    : fp8_detail::encode(x, fp8_detail::kE5M2, saturate);
}

// fp8 -> fp32, exact. E4M3's NaN becomes the quiet NaN 0x7FC00000 with the
// code's sign; E5M2 is the top byte of an fp16 and converts as
// half_bits_to_float does (NaN sign and payload kept, quieted).
inline float fp8_to_float(uint8_t code, Fp8Format format) {
  if (format == Fp8Format::kE4M3) return fp8_detail::decode_e4m3(code);
  return half_bits_to_float(static_cast<uint16_t>(code << 8));
}

}  // namespace mixtrain
