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
  MagnitudeHistogram want;
  for (const T& v : values) {
    const double x = std::fabs(static_cast<double>(to_float(v)));
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
