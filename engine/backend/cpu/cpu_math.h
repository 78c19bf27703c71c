// Why: softmax and GELU spend their time in exp, and libm's expf is a call
// that GCC will not vectorize without -ffast-math. This inline version is
// branch-free arithmetic and bit operations, so loops that call it
// vectorize to the width of each MIXTRAIN_MULTIVERSION clone. It keeps NaN
// as NaN, which the loss scaler's overflow detection relies on.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

namespace mixtrain::cpu_ops {

// e^x, relative error below 2e-7 for x in [-87.33, 88]; 0 below that range
// (where e^x < 1.2e-38) and +inf above it (where e^x > 1.6e38); NaN for
// NaN. Cody-Waite reduction x = n ln2 + r with |r| <= ln2/2, a degree-7
// Taylor polynomial for e^r, and 2^n built from exponent bits.
inline float exp_approx(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;      // ln 2 in few bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;   // ln 2 - kLn2Hi
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  constexpr float kMinArg = -87.33f;          // n >= -126: 2^n is a normal float
  constexpr float kMaxArg = 88.0f;            // n <= 127
  // std::max/min keep a NaN first argument, so NaN flows through to the result.
  const float xc = std::min(std::max(x, kMinArg), kMaxArg);
  const float shifted = xc * kLog2e + kRoundMagic;  // low mantissa bits hold n
  const float n = shifted - kRoundMagic;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const uint32_t two_to_n = (std::bit_cast<uint32_t>(shifted) - 0x4B400000u + 127u) << 23;
  float y = p * std::bit_cast<float>(two_to_n);
  y = x < kMinArg ? 0.0f : y;
  y = x > kMaxArg ? std::numeric_limits<float>::infinity() : y;
  return y;
}

}  // namespace mixtrain::cpu_ops
