// Why: an independent model of the engine's number formats for the tests,
// built from arithmetic (ldexp/frexp/nearbyint in double) rather than the
// bit manipulation the engine uses, so a shared mistake cannot hide. It
// gives each format's value table, a per-value round-to-nearest-even
// encoder, and the exact fp32 thresholds where the rounded code changes,
// which the exhaustive tests use to check all 2^32 fp32 inputs quickly.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

namespace mixtrain::testing {

// A binary floating-point storage format of total_bits with one sign bit.
struct RefFormat {
  const char* name;
  int total_bits;
  int mantissa_bits;
  int exponent_bias;
  uint32_t max_finite_code;  // largest finite magnitude code
  uint32_t nan_code;         // what a NaN input of either sign becomes
  uint32_t overflow_code;  // non-saturating overflow and +-inf input
  bool can_saturate;       // fp8: a saturating mode sends overflow to max
  // Magnitude codes above max_finite_code that are NaN (fp8 E4M3: only
  // 0x7F; IEEE-like: all with the exponent field full except infinity).
  bool (*is_nan_code)(uint32_t magnitude_code);
};

inline bool ieee_nan_code16(uint32_t m) { return m > 0x7c00u; }
inline bool bf16_nan_code(uint32_t m) { return m > 0x7f80u; }
inline bool e4m3_nan_code(uint32_t m) { return m == 0x7fu; }
inline bool e5m2_nan_code(uint32_t m) { return m > 0x7cu; }

inline const RefFormat kRefF16{.name = "fp16",
                               .total_bits = 16,
                               .mantissa_bits = 10,
                               .exponent_bias = 15,
                               .max_finite_code = 0x7bffu,
                               .nan_code = 0x7fffu,
                               .overflow_code = 0x7c00u,
                               .can_saturate = false,
                               .is_nan_code = ieee_nan_code16};
inline const RefFormat kRefBF16{.name = "bf16",
                                .total_bits = 16,
                                .mantissa_bits = 7,
                                .exponent_bias = 127,
                                .max_finite_code = 0x7f7fu,
                                .nan_code = 0x7fffu,
                                .overflow_code = 0x7f80u,
                                .can_saturate = false,
                                .is_nan_code = bf16_nan_code};
inline const RefFormat kRefE4M3{.name = "e4m3",
                                .total_bits = 8,
                                .mantissa_bits = 3,
                                .exponent_bias = 7,
                                .max_finite_code = 0x7eu,
                                .nan_code = 0x7fu,
                                .overflow_code = 0x7fu,
                                .can_saturate = true,
                                .is_nan_code = e4m3_nan_code};
inline const RefFormat kRefE5M2{.name = "e5m2",
                                .total_bits = 8,
                                .mantissa_bits = 2,
                                .exponent_bias = 15,
                                .max_finite_code = 0x7bu,
                                .nan_code = 0x7fu,
                                .overflow_code = 0x7cu,
                                .can_saturate = true,
                                .is_nan_code = e5m2_nan_code};

inline uint32_t sign_bit(const RefFormat& f) { return 1u << (f.total_bits - 1); }

// The value of a finite magnitude code (no sign), by the textbook formula.
inline double ref_magnitude_value(const RefFormat& f, uint32_t magnitude_code) {
  int exponent_field = static_cast<int>(magnitude_code >> f.mantissa_bits);
  double mantissa = static_cast<double>(magnitude_code & ((1u << f.mantissa_bits) - 1u));
  double fraction = std::ldexp(mantissa, -f.mantissa_bits);
  if (exponent_field == 0) return std::ldexp(fraction, 1 - f.exponent_bias);
  return std::ldexp(1.0 + fraction, exponent_field - f.exponent_bias);
}

// The value of any code: NaN for NaN codes, +-inf for the infinity code.
inline double ref_decode(const RefFormat& f, uint32_t code) {
  uint32_t magnitude = code & (sign_bit(f) - 1u);
  bool negative = (code & sign_bit(f)) != 0;
  double value;
  if (f.is_nan_code(magnitude)) {
    value = std::nan("");
  } else if (magnitude > f.max_finite_code) {
    value = INFINITY;
  } else {
    value = ref_magnitude_value(f, magnitude);
  }
  return negative ? -value : value;
}

// Rounds x to f, nearest even, one value at a time: the quantum of x's
// binade (never below the subnormal quantum) divides x exactly, nearbyint
// rounds half to even, and the rounded value is re-encoded from frexp.
inline uint32_t ref_encode(const RefFormat& f, double x, bool saturate) {
  if (std::isnan(x)) return f.nan_code;
  uint32_t sign = std::signbit(x) ? sign_bit(f) : 0u;
  double a = std::fabs(x);
  double max_value = ref_magnitude_value(f, f.max_finite_code);
  uint32_t overflow = (saturate && f.can_saturate) ? f.max_finite_code : f.overflow_code;
  if (std::isinf(a)) return sign | overflow;
  if (a == 0.0) return sign;
  int min_exponent = 1 - f.exponent_bias;
  int e;
  std::frexp(a, &e);  // a = fraction * 2^e, fraction in [0.5, 1)
  int exponent = std::max(e - 1, min_exponent);
  double quantum = std::ldexp(1.0, exponent - f.mantissa_bits);
  double rounded = std::nearbyint(a / quantum) * quantum;
  if (rounded > max_value) return sign | overflow;
  if (rounded == 0.0) return sign;
  if (rounded < std::ldexp(1.0, min_exponent)) {
    return sign | static_cast<uint32_t>(rounded / std::ldexp(1.0, min_exponent - f.mantissa_bits));
  }
  std::frexp(rounded, &e);
  double significand = std::ldexp(rounded, 1 - e);  // in [1, 2)
  auto exponent_field = static_cast<uint32_t>(e - 1 + f.exponent_bias);
  auto mantissa = static_cast<uint32_t>(std::ldexp(significand - 1.0, f.mantissa_bits));
  return sign | (exponent_field << f.mantissa_bits) | mantissa;
}

inline uint32_t float_bits(float x) { return std::bit_cast<uint32_t>(x); }
inline float bits_float(uint32_t bits) { return std::bit_cast<float>(bits); }

// A run of fp32 magnitudes (|x| bit patterns, which order like the values)
// that all round to one code: [first_magnitude_bits, next segment's).
struct Segment {
  uint32_t first_magnitude_bits;
  uint32_t magnitude_code;
  bool is_nan;  // the NaN range: its code is unsigned
};

// The first fp32 at or above which round-to-nearest-even gives the code
// `upper` instead of `upper - 1`: the midpoint of their values, which goes
// to whichever of the two codes is even.
inline uint32_t ref_threshold_bits(double lower_value, double upper_value, uint32_t upper) {
  double midpoint = (lower_value + upper_value) / 2;  // exact: fits in fp32
  auto bits = float_bits(static_cast<float>(midpoint));
  return (upper % 2 == 0) ? bits : bits + 1;
}

// Every fp32 magnitude from 0 to the NaNs, split into the codes they round
// to. Overflow starts where rounding would pick the code after max if that
// code were a number one ulp above max (480 for E4M3, 65536 for fp16), by
// the same even rule.
inline std::vector<Segment> ref_segments(const RefFormat& f, bool saturate) {
  std::vector<Segment> segments{{0u, 0u, false}};
  for (uint32_t code = 1; code <= f.max_finite_code; ++code) {
    segments.push_back(
        {ref_threshold_bits(ref_magnitude_value(f, code - 1), ref_magnitude_value(f, code), code),
         code, false});
  }
  double max_value = ref_magnitude_value(f, f.max_finite_code);
  double max_ulp = std::ldexp(1.0, std::ilogb(max_value) - f.mantissa_bits);
  uint32_t overflow = (saturate && f.can_saturate) ? f.max_finite_code : f.overflow_code;
  segments.push_back(
      {ref_threshold_bits(max_value, max_value + max_ulp, f.max_finite_code + 1), overflow, false});
  segments.push_back({0x7f800001u, f.nan_code, true});
  return segments;
}

// Fills expected[i] with the code of the fp32 pattern begin_bits + i, for a
// range that does not cross the sign bit.
template <class Code>
void fill_expected(const RefFormat& f, const std::vector<Segment>& segments, uint32_t begin_bits,
                   size_t count, Code* expected) {
  uint32_t sign = (begin_bits & 0x80000000u) ? sign_bit(f) : 0u;
  uint32_t magnitude = begin_bits & 0x7fffffffu;
  auto after = std::upper_bound(
      segments.begin(), segments.end(), magnitude,
      [](uint32_t bits, const Segment& seg) { return bits < seg.first_magnitude_bits; });
  auto s = static_cast<size_t>(after - segments.begin()) - 1;
  size_t i = 0;
  while (i < count) {
    uint64_t segment_end =
        s + 1 < segments.size() ? segments[s + 1].first_magnitude_bits : uint64_t{0x80000000u};
    size_t run = static_cast<size_t>(std::min<uint64_t>(segment_end - (magnitude + i), count - i));
    const Segment& seg = segments[s];
    uint32_t code = seg.magnitude_code | (seg.is_nan ? 0u : sign);
    std::fill(expected + i, expected + i + run, static_cast<Code>(code));
    i += run;
    ++s;
  }
}

}  // namespace mixtrain::testing
