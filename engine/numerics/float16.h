// Why: the scalar 16-bit conversions every CPU kernel inlines in its loops.
// fp32 -> fp16/bf16 match CUDA's __float2half_rn / __float2bfloat16_rn bit
// for bit: round to nearest even, subnormals kept, overflow to +-inf, any
// NaN becomes the canonical 0x7FFF. fp16/bf16 -> fp32 are exact; a NaN
// keeps its sign and payload and is quieted, as x86 F16C does.
#pragma once

#include <bit>
#include <cstdint>

namespace mixtrain {

// Storage types: 16 raw bits, no arithmetic. Load with to_float(), store
// with from_float<T>().
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

// Every case is computed and the right one selected, without branches, so
// loops over it vectorize.
inline uint16_t float_to_half_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  // Normal half (|x| >= 2^-14): drop 13 mantissa bits, nearest even, rebias.
  uint32_t normal = (ax + 0x0fffu + ((ax >> 13) & 1u) - 0x38000000u) >> 13;
  // Subnormal half: the value in units of 2^-24 is m * 2^-shift, rounded to
  // nearest even; shift = 126 - exponent, capped at 31 (|x| <= 2^-25 gives
  // 0). Computed from |x| capped below 2^-14, so shift is at least 13.
  uint32_t tiny = ax < 0x38800000u ? ax : 0x38800000u;
  uint32_t shift = 126u - (tiny >> 23);
  shift = shift < 31u ? shift : 31u;
  uint32_t m = (tiny & 0x7fffffu) | 0x800000u;
  uint32_t subnormal = (m + (1u << (shift - 1u)) - 1u + ((m >> shift) & 1u)) >> shift;
  uint32_t finite = sign | (ax < 0x38800000u ? subnormal : normal);
  uint32_t special = ax > 0x7f800000u ? 0x7fffu : (sign | 0x7c00u);  // NaN, or >= 65520: inf
  return static_cast<uint16_t>(ax >= 0x477ff000u ? special : finite);
}

inline float half_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1fu) {
    bits = sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal half: mant * 2^-24 with its top set bit at position p.
    uint32_t p = 31u - static_cast<uint32_t>(std::countl_zero(mant));
    bits = sign | ((p + 103u) << 23) | (((mant << (10u - p)) & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t float_to_bf16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;  // nearest even
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? 0x7fffu : rounded);  // NaN
}

inline float bf16_bits_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline float to_float(float x) { return x; }
inline float to_float(Half x) { return half_bits_to_float(x.bits); }
inline float to_float(BFloat16 x) { return bf16_bits_to_float(x.bits); }

template <class T> inline T from_float(float x);
template <> inline float from_float<float>(float x) { return x; }
template <> inline Half from_float<Half>(float x) { return Half{float_to_half_bits(x)}; }
template <> inline BFloat16 from_float<BFloat16>(float x) {
  return BFloat16{float_to_bf16_bits(x)};
}

}  // namespace mixtrain
