// Why: the gradient-range histogram is what users read fp16 underflow
// from; its buckets must hold exactly the magnitudes their bounds say, and
// its subnormal count must follow the storage format. The reference is
// frexp in double: |x| = f * 2^e with f in [0.5, 1), so ceil(log2 |x|) is
// e - 1 for f == 0.5 and e otherwise.
#include "engine/numerics/magnitude_histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace mixtrain {
namespace {

int reference_bucket(double magnitude) {
  int e = 0;
  const double f = std::frexp(magnitude, &e);
  const int ceiling = f == 0.5 ? e - 1 : e;
  return std::clamp(ceiling, MagnitudeHistogram::kMinLog2, MagnitudeHistogram::kMaxLog2) -
         MagnitudeHistogram::kMinLog2;
}

MagnitudeHistogram reference_histogram(const std::vector<double>& values, double smallest_normal) {
  MagnitudeHistogram want;
  for (double v : values) {
    const double x = std::fabs(v);
    if (x == 0.0) {
      ++want.zeros;
    } else if (!std::isfinite(x)) {
      ++want.nonfinite;
    } else {
      ++want.buckets[static_cast<size_t>(reference_bucket(x))];
      want.subnormals += x < smallest_normal;
      want.amax = std::max(want.amax, static_cast<float>(x));
    }
  }
  return want;
}

template <class T>
void check_against_reference(double smallest_normal) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> exponent(-60, 30);
  std::uniform_real_distribution<float> mantissa(-2.0f, 2.0f);
  std::vector<T> values;
  for (int i = 0; i < 300000; ++i) {
    values.push_back(from_float<T>(std::ldexp(mantissa(rng), exponent(rng))));
  }
  for (float special : {0.0f, -0.0f, 1.0f, 0.5f, -0.25f, std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN(), 1e-40f}) {
    values.push_back(from_float<T>(special));
  }
  std::vector<double> widened;
  for (const T& v : values) widened.push_back(static_cast<double>(to_float(v)));
  const MagnitudeHistogram want = reference_histogram(widened, smallest_normal);
  MagnitudeHistogram got;
  add_to_histogram(values.data(), values.size(), got);
  EXPECT_EQ(got.buckets, want.buckets);
  EXPECT_EQ(got.zeros, want.zeros);
  EXPECT_EQ(got.nonfinite, want.nonfinite);
  EXPECT_EQ(got.subnormals, want.subnormals);
  EXPECT_EQ(got.amax, want.amax);
  EXPECT_EQ(got.total(), static_cast<int64_t>(values.size()));
  EXPECT_GT(want.subnormals, 0);
}

TEST(MagnitudeHistogram, Fp32MatchesTheReference) { check_against_reference<float>(0x1p-126); }
TEST(MagnitudeHistogram, Bf16MatchesTheReference) { check_against_reference<BFloat16>(0x1p-126); }
TEST(MagnitudeHistogram, Fp16SubnormalsAreFp16s) { check_against_reference<Half>(0x1p-14); }

// An fp8 code's value from the format's definition (OCP 8-bit floating
// point: E4M3 bias 7 with S.1111.111 the only NaN, E5M2 bias 15 with
// IEEE inf/NaN).
double fp8_value(uint8_t code, bool e4m3) {
  const int exponent_bits = e4m3 ? 4 : 5, mantissa_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const int exponent = (code >> mantissa_bits) & ((1 << exponent_bits) - 1);
  const int mantissa = code & ((1 << mantissa_bits) - 1);
  const double sign = (code & 0x80) != 0 ? -1.0 : 1.0;
  if (e4m3 && exponent == 15 && mantissa == 7) return std::numeric_limits<double>::quiet_NaN();
  if (!e4m3 && exponent == 31) {
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  }
  const double fraction = std::ldexp(mantissa, -mantissa_bits);
  return exponent == 0 ? sign * std::ldexp(fraction, 1 - bias)
                       : sign * std::ldexp(1.0 + fraction, exponent - bias);
}

// Every code of both formats, 1100 times each (past the parallel
// threshold), counted by value with the format's own subnormals.
TEST(MagnitudeHistogram, Fp8CodesCountByTheirValues) {
  for (bool e4m3 : {true, false}) {
    SCOPED_TRACE(e4m3 ? "e4m3" : "e5m2");
    std::vector<uint8_t> codes;
    std::vector<double> values;
    for (int repeat = 0; repeat < 1100; ++repeat) {
      for (int code = 0; code < 256; ++code) {
        codes.push_back(static_cast<uint8_t>(code));
        values.push_back(fp8_value(static_cast<uint8_t>(code), e4m3));
      }
    }
    const MagnitudeHistogram want = reference_histogram(values, e4m3 ? 0x1p-6 : 0x1p-14);
    MagnitudeHistogram got;
    add_fp8_to_histogram(codes.data(), codes.size(), e4m3 ? Fp8Format::kE4M3 : Fp8Format::kE5M2,
                         got);
    EXPECT_EQ(got, want);
    EXPECT_EQ(want.subnormals, 2 * (e4m3 ? 7 : 3) * 1100);  // both signs
    EXPECT_EQ(want.amax, e4m3 ? 448.0f : 57344.0f);
  }
}

TEST(MagnitudeHistogram, BucketBoundsAreInclusiveAbove) {
  // Bucket b holds 2^(b-1) < |x| <= 2^b.
  EXPECT_EQ(magnitude_bucket(1.0f), 0 - MagnitudeHistogram::kMinLog2);
  EXPECT_EQ(magnitude_bucket(std::nextafter(1.0f, 2.0f)), 1 - MagnitudeHistogram::kMinLog2);
  EXPECT_EQ(magnitude_bucket(0.75f), 0 - MagnitudeHistogram::kMinLog2);
  EXPECT_EQ(magnitude_bucket(1e-30f), 0);                                // clamped low
  EXPECT_EQ(magnitude_bucket(1e30f), MagnitudeHistogram::kBuckets - 1);  // clamped high
}

}  // namespace
}  // namespace mixtrain
