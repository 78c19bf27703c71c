// Why: the fp8 contract (fp8.h) spelled out case by case at every edge that
// CUDA's __nv_cvt_float_to_fp8 defines, plus all 256 codes of each format
// through fp32 and back; the all-fp32 sweep lives in the exhaustive test.
#include "engine/numerics/fp8.h"

#include <gtest/gtest.h>

#include <cmath>

#include "reference_formats.h"

namespace mixtrain::testing {
namespace {

constexpr Fp8Format kE4M3 = Fp8Format::kE4M3;
constexpr Fp8Format kE5M2 = Fp8Format::kE5M2;

float next_up(float x) { return std::nextafter(x, INFINITY); }
float next_down(float x) { return std::nextafter(x, -INFINITY); }

// (saturating, non-saturating) codes for x.
std::pair<int, int> codes(float x, Fp8Format f) {
  return {float_to_fp8(x, f, true), float_to_fp8(x, f, false)};
}

TEST(Fp8E4M3, OverflowAndSaturation) {
  using P = std::pair<int, int>;
  EXPECT_EQ(codes(448.0f, kE4M3), P(0x7e, 0x7e));           // max
  EXPECT_EQ(codes(464.0f, kE4M3), P(0x7e, 0x7e));           // max + half ulp ties to even
  EXPECT_EQ(codes(next_up(464.0f), kE4M3), P(0x7e, 0x7f));  // first overflow
  EXPECT_EQ(codes(465.0f, kE4M3), P(0x7e, 0x7f));
  EXPECT_EQ(codes(480.0f, kE4M3), P(0x7e, 0x7f));
  EXPECT_EQ(codes(1e30f, kE4M3), P(0x7e, 0x7f));
  EXPECT_EQ(codes(INFINITY, kE4M3), P(0x7e, 0x7f));  // no inf in E4M3: NaN
  EXPECT_EQ(codes(-INFINITY, kE4M3), P(0xfe, 0xff));
  EXPECT_EQ(codes(-465.0f, kE4M3), P(0xfe, 0xff));
  EXPECT_EQ(codes(440.0f, kE4M3), P(0x7e, 0x7e));  // 416 + 24 rounds to 448
  EXPECT_EQ(codes(432.0f, kE4M3), P(0x7e, 0x7e));  // tie 416/448 to even 448
}

TEST(Fp8E4M3, NaNSubnormalsAndZero) {
  using P = std::pair<int, int>;
  EXPECT_EQ(codes(NAN, kE4M3), P(0x7f, 0x7f));
  EXPECT_EQ(codes(-NAN, kE4M3), P(0x7f, 0x7f));                   // canonical, as CUDA
  EXPECT_EQ(codes(std::ldexp(1.0f, -9), kE4M3), P(0x01, 0x01));   // min subnormal
  EXPECT_EQ(codes(std::ldexp(1.0f, -10), kE4M3), P(0x00, 0x00));  // half of it ties to 0
  EXPECT_EQ(codes(next_up(std::ldexp(1.0f, -10)), kE4M3), P(0x01, 0x01));
  EXPECT_EQ(codes(std::ldexp(3.0f, -10), kE4M3), P(0x02, 0x02));   // 1.5 ulp ties to even
  EXPECT_EQ(codes(std::ldexp(7.0f, -9), kE4M3), P(0x07, 0x07));    // largest subnormal
  EXPECT_EQ(codes(std::ldexp(1.0f, -6), kE4M3), P(0x08, 0x08));    // min normal
  EXPECT_EQ(codes(std::ldexp(15.0f, -10), kE4M3), P(0x08, 0x08));  // rounds into normals
  EXPECT_EQ(codes(-std::ldexp(1.0f, -10), kE4M3), P(0x80, 0x80));  // -0
  EXPECT_EQ(codes(-0.0f, kE4M3), P(0x80, 0x80));
  EXPECT_EQ(codes(1.0f, kE4M3), P(0x38, 0x38));
  EXPECT_EQ(codes(1.0625f, kE4M3), P(0x38, 0x38));  // tie to even
  EXPECT_EQ(codes(1.1875f, kE4M3), P(0x3a, 0x3a));  // tie to even
}

TEST(Fp8E5M2, OverflowSaturationAndNaN) {
  using P = std::pair<int, int>;
  EXPECT_EQ(codes(57344.0f, kE5M2), P(0x7b, 0x7b));  // max
  EXPECT_EQ(codes(61439.0f, kE5M2), P(0x7b, 0x7b));
  EXPECT_EQ(codes(next_down(61440.0f), kE5M2), P(0x7b, 0x7b));
  EXPECT_EQ(codes(61440.0f, kE5M2), P(0x7b, 0x7c));  // tie goes to the inf code
  EXPECT_EQ(codes(INFINITY, kE5M2), P(0x7b, 0x7c));
  EXPECT_EQ(codes(-INFINITY, kE5M2), P(0xfb, 0xfc));
  EXPECT_EQ(codes(NAN, kE5M2), P(0x7f, 0x7f));  // canonical, as CUDA
  EXPECT_EQ(codes(-NAN, kE5M2), P(0x7f, 0x7f));
  EXPECT_EQ(codes(std::ldexp(1.0f, -16), kE5M2), P(0x01, 0x01));  // min subnormal
  EXPECT_EQ(codes(std::ldexp(1.0f, -17), kE5M2), P(0x00, 0x00));  // ties to 0
  EXPECT_EQ(codes(next_up(std::ldexp(1.0f, -17)), kE5M2), P(0x01, 0x01));
  EXPECT_EQ(codes(std::ldexp(3.0f, -16), kE5M2), P(0x03, 0x03));  // largest subnormal
  EXPECT_EQ(codes(std::ldexp(1.0f, -14), kE5M2), P(0x04, 0x04));  // min normal
  EXPECT_EQ(codes(-0.0f, kE5M2), P(0x80, 0x80));
  EXPECT_EQ(codes(1.125f, kE5M2), P(0x3c, 0x3c));  // tie to even 1.0
}

TEST(Fp8, DecodesSpecialCodes) {
  EXPECT_EQ(fp8_to_float(0x7e, kE4M3), 448.0f);
  EXPECT_EQ(fp8_to_float(0xfe, kE4M3), -448.0f);
  EXPECT_EQ(fp8_to_float(0x01, kE4M3), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(fp8_to_float(0x7f, kE4M3)));
  EXPECT_EQ(float_bits(fp8_to_float(0xff, kE4M3)), 0xffc00000u);  // quiet NaN, sign kept
  EXPECT_EQ(fp8_to_float(0x7b, kE5M2), 57344.0f);
  EXPECT_EQ(fp8_to_float(0x7c, kE5M2), INFINITY);
  EXPECT_EQ(fp8_to_float(0xfc, kE5M2), -INFINITY);
  EXPECT_EQ(fp8_to_float(0x01, kE5M2), std::ldexp(1.0f, -16));
  EXPECT_TRUE(std::signbit(fp8_to_float(0x80, kE5M2)));
}

// All 256 codes decode to the textbook value and come back unchanged
// through fp32 in both modes; NaN codes stay NaN.
void check_all_codes(const RefFormat& reference, Fp8Format format) {
  for (uint32_t code = 0; code < 256; ++code) {
    float value = fp8_to_float(static_cast<uint8_t>(code), format);
    double expected = ref_decode(reference, code);
    for (bool saturate : {false, true}) {
      uint8_t back = float_to_fp8(value, format, saturate);
      if (std::isnan(expected)) {
        ASSERT_TRUE(std::isnan(value)) << reference.name << " code " << code;
        ASSERT_TRUE(std::isnan(ref_decode(reference, back))) << reference.name << " " << code;
        ASSERT_EQ(back, 0x7fu) << reference.name << " canonical NaN, code " << code;
        continue;
      }
      ASSERT_EQ(static_cast<double>(value), expected) << reference.name << " code " << code;
      ASSERT_EQ(std::signbit(value), (code & 0x80u) != 0) << reference.name << " code " << code;
      bool infinite = std::isinf(value);
      ASSERT_EQ(back, (infinite && saturate) ? (code & 0x80u) | reference.max_finite_code : code)
          << reference.name << " code " << code << (saturate ? " saturating" : "");
    }
  }
}

TEST(Fp8E4M3, AllCodesDecodeExactlyAndRoundTrip) { check_all_codes(kRefE4M3, kE4M3); }
TEST(Fp8E5M2, AllCodesDecodeExactlyAndRoundTrip) { check_all_codes(kRefE5M2, kE5M2); }

}  // namespace
}  // namespace mixtrain::testing
