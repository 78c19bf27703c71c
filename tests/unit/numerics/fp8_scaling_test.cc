// Why: amax and fp8_scale decide every fp8 tensor's range; their edge cases
// (empty, NaN, inf, zero, tiny) must not poison the scale.
#include "engine/numerics/fp8_scaling.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <vector>

namespace mixtrain {
namespace {

TEST(Amax, LargestMagnitudeIgnoringNaN) {
  std::vector<float> x = {1.0f, -7.5f, NAN, 3.0f, -NAN};
  EXPECT_EQ(amax(x.data(), x.size()), 7.5f);
  EXPECT_EQ(amax(x.data(), 0), 0.0f);
  std::vector<float> only_nan = {NAN, -NAN};
  EXPECT_EQ(amax(only_nan.data(), only_nan.size()), 0.0f);
  std::vector<float> with_inf = {1.0f, -INFINITY, NAN};
  EXPECT_EQ(amax(with_inf.data(), with_inf.size()), INFINITY);
  std::vector<float> negative_zero = {-0.0f};
  EXPECT_EQ(amax(negative_zero.data(), 1), 0.0f);
}

TEST(Amax, LargeArraysMultiThreaded) {
  std::vector<float> x(1000003);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i));
  x[777777] = -12.0f;
  x[5] = NAN;
  EXPECT_EQ(amax(x.data(), x.size()), 12.0f);
}

TEST(Fp8Scale, FormatMaxOverAmaxWithMargin) {
  EXPECT_EQ(fp8_scale(448.0f, Fp8Format::kE4M3), 1.0f);
  EXPECT_EQ(fp8_scale(1.0f, Fp8Format::kE4M3), 448.0f);
  EXPECT_EQ(fp8_scale(1.0f, Fp8Format::kE4M3, 1), 224.0f);
  EXPECT_EQ(fp8_scale(2.0f, Fp8Format::kE5M2, 2), 57344.0f / 2.0f / 4.0f);
  EXPECT_EQ(fp8_scale(1.0f, Fp8Format::kE5M2, -1), 2.0f * 57344.0f);
  EXPECT_EQ(fp8_scale(-4.0f, Fp8Format::kE4M3), 112.0f);  // magnitude used
}

TEST(Fp8Scale, NoInformationGivesOne) {
  EXPECT_EQ(fp8_scale(0.0f, Fp8Format::kE4M3), 1.0f);
  EXPECT_EQ(fp8_scale(-0.0f, Fp8Format::kE5M2), 1.0f);
  EXPECT_EQ(fp8_scale(INFINITY, Fp8Format::kE4M3), 1.0f);
  EXPECT_EQ(fp8_scale(NAN, Fp8Format::kE5M2), 1.0f);
}

TEST(Fp8Scale, TinyAmaxStaysFinite) {
  float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(fp8_scale(tiny, Fp8Format::kE4M3), FLT_MAX);
  EXPECT_TRUE(std::isfinite(fp8_scale(1e-30f, Fp8Format::kE4M3, -100)));
}

// The scaled cast is the scalar cast of fp32(x * scale), element by
// element, with the amax of x and the count of scaled values past max.
TEST(QuantizeFp8, ScaledCastAmaxAndSaturationCount) {
  for (Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    std::vector<float> x(300001);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * 3.0f;
    x[17] = -40.0f;        // * 16 = 640: past E4M3's max only
    x[99999] = NAN;        // ignored by amax, not saturated
    x[200000] = INFINITY;  // saturated, amax inf
    const float scale = 16.0f;
    std::vector<uint8_t> got(x.size());
    Fp8QuantizeStats stats = quantize_fp8(x.data(), x.size(), scale, format, got.data());
    int64_t expected_saturated = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      float scaled = x[i] * scale;
      ASSERT_EQ(got[i], float_to_fp8(scaled, format)) << i;
      expected_saturated += std::fabs(scaled) > fp8_max(format);
    }
    EXPECT_EQ(stats.amax, INFINITY);
    EXPECT_EQ(stats.saturated, expected_saturated);
    EXPECT_EQ(stats.saturated, format == Fp8Format::kE4M3 ? 2 : 1);
    x[200000] = 0.0f;
    stats = quantize_fp8(x.data(), x.size(), scale, format, got.data());
    EXPECT_EQ(stats.amax, 40.0f);
  }
  std::vector<BFloat16> half_precision = {from_float<BFloat16>(-2.5f), from_float<BFloat16>(1.0f)};
  uint8_t codes[2];
  Fp8QuantizeStats stats = quantize_fp8(half_precision.data(), 2, 100.0f, Fp8Format::kE4M3, codes);
  EXPECT_EQ(stats.amax, 2.5f);
  EXPECT_EQ(stats.saturated, 0);
  EXPECT_EQ(codes[0], float_to_fp8(-250.0f, Fp8Format::kE4M3));
}

}  // namespace
}  // namespace mixtrain
