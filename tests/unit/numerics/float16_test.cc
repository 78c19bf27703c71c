// Why: the 16-bit formats' contract spelled out case by case (ties to even,
// subnormal edges, overflow, signed zero, NaN), plus every 16-bit pattern
// through fp32 and back; the all-fp32 sweep lives in the exhaustive test.
#include "engine/numerics/float16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "reference_formats.h"

namespace mixtrain::testing {
namespace {

float two_pow(int e) { return std::ldexp(1.0f, e); }
float next_up(float x) { return std::nextafter(x, INFINITY); }
float next_down(float x) { return std::nextafter(x, -INFINITY); }

TEST(Float16, TiesRoundToEven) {
  EXPECT_EQ(float_to_half_bits(1.0f + two_pow(-11)), 0x3c00);      // tie, 1.0 is even
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * two_pow(-11)), 0x3c02);  // tie, 1+2^-9 is even
  EXPECT_EQ(float_to_half_bits(next_up(1.0f + two_pow(-11))), 0x3c01);
  EXPECT_EQ(float_to_half_bits(next_down(1.0f + 3 * two_pow(-11))), 0x3c01);
}

TEST(Float16, SubnormalBoundaries) {
  EXPECT_EQ(float_to_half_bits(two_pow(-24)), 0x0001);             // smallest subnormal
  EXPECT_EQ(float_to_half_bits(two_pow(-25)), 0x0000);             // half of it ties to 0
  EXPECT_EQ(float_to_half_bits(next_up(two_pow(-25))), 0x0001);    // just above rounds up
  EXPECT_EQ(float_to_half_bits(3 * two_pow(-25)), 0x0002);         // 1.5 ulp ties to even 2
  EXPECT_EQ(float_to_half_bits(1023 * two_pow(-24)), 0x03ff);      // largest subnormal
  EXPECT_EQ(float_to_half_bits(two_pow(-14)), 0x0400);             // smallest normal
  EXPECT_EQ(float_to_half_bits(next_down(two_pow(-14))), 0x0400);  // rounds up into normals
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -149)), 0x0000);   // fp32 subnormal: 0
  EXPECT_EQ(half_bits_to_float(0x0001), two_pow(-24));
  EXPECT_EQ(half_bits_to_float(0x03ff), 1023 * two_pow(-24));
}

TEST(Float16, OverflowThresholds) {
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);             // max
  EXPECT_EQ(float_to_half_bits(next_down(65520.0f)), 0x7bff);  // 65519.996
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);             // max + half ulp: inf
  EXPECT_EQ(float_to_half_bits(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_half_bits(INFINITY), 0x7c00);
  EXPECT_EQ(float_to_half_bits(-INFINITY), 0xfc00);
  EXPECT_EQ(float_to_half_bits(3.0e38f), 0x7c00);
}

TEST(Float16, SignedZeroAndNaN) {
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half_bits(-two_pow(-26)), 0x8000);  // underflow keeps the sign
  EXPECT_EQ(float_to_half_bits(NAN), 0x7fff);            // canonical, as CUDA
  EXPECT_EQ(float_to_half_bits(-NAN), 0x7fff);
  EXPECT_EQ(float_to_half_bits(bits_float(0x7f800001u)), 0x7fff);  // signalling NaN
  EXPECT_TRUE(std::signbit(half_bits_to_float(0x8000)));
  // fp16 NaN -> fp32 keeps sign and payload and is quieted (as F16C).
  EXPECT_EQ(float_bits(half_bits_to_float(0xfc01)), 0xffc02000u);
}

TEST(BFloat16, TiesOverflowAndSubnormalsKept) {
  EXPECT_EQ(float_to_bf16_bits(1.0f + two_pow(-8)), 0x3f80);       // tie to even 1.0
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * two_pow(-8)), 0x3f82);   // tie to even
  EXPECT_EQ(float_to_bf16_bits(bits_float(0x7f7f0000u)), 0x7f7f);  // max 3.3895e38
  EXPECT_EQ(float_to_bf16_bits(bits_float(0x7f7f7fffu)), 0x7f7f);  // below the midpoint
  EXPECT_EQ(float_to_bf16_bits(bits_float(0x7f7f8000u)), 0x7f80);  // midpoint: inf
  EXPECT_EQ(float_to_bf16_bits(-INFINITY), 0xff80);
  // fp32 subnormals stay subnormal (VCVTNEPS2BF16 would flush these).
  EXPECT_EQ(float_to_bf16_bits(bits_float(0x00010000u)), 0x0001);  // 2^-133
  EXPECT_EQ(float_to_bf16_bits(bits_float(0x00008000u)), 0x0000);  // 2^-134 ties to 0
  EXPECT_EQ(float_to_bf16_bits(bits_float(0x00008001u)), 0x0001);
  EXPECT_EQ(float_to_bf16_bits(bits_float(0x00018000u)), 0x0002);  // tie to even
  EXPECT_EQ(float_to_bf16_bits(bits_float(0x807fffffu)), 0x8080);  // rounds up to -2^-126
  EXPECT_EQ(float_to_bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16_bits(NAN), 0x7fff);
  EXPECT_EQ(float_to_bf16_bits(bits_float(0xff800001u)), 0x7fff);
}

// Every pattern decodes to the value the textbook formula gives, and
// survives fp32 and back unchanged (NaNs stay NaN, canonicalized).
void check_all_patterns(const RefFormat& format, float (*to_f32)(uint16_t),
                        uint16_t (*from_f32)(float)) {
  for (uint32_t code = 0; code <= 0xffff; ++code) {
    auto bits = static_cast<uint16_t>(code);
    float value = to_f32(bits);
    double expected = ref_decode(format, code);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(value)) << format.name << " 0x" << std::hex << code;
      ASSERT_EQ(from_f32(value), 0x7fff) << format.name << " 0x" << std::hex << code;
      continue;
    }
    ASSERT_EQ(static_cast<double>(value), expected) << format.name << " 0x" << std::hex << code;
    ASSERT_EQ(std::signbit(value), (code & 0x8000) != 0)
        << format.name << " 0x" << std::hex << code;
    ASSERT_EQ(from_f32(value), bits) << format.name << " 0x" << std::hex << code;
  }
}

TEST(Float16, AllPatternsDecodeExactlyAndRoundTrip) {
  check_all_patterns(kRefF16, half_bits_to_float, float_to_half_bits);
}

TEST(BFloat16, AllPatternsDecodeExactlyAndRoundTrip) {
  check_all_patterns(kRefBF16, bf16_bits_to_float, float_to_bf16_bits);
}

}  // namespace
}  // namespace mixtrain::testing
