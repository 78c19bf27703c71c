// Why: the exhaustive tests trust reference_formats.h, so the reference is
// checked against itself two ways (value-by-value rounding vs threshold
// segments) and against hand-computed values.
#include "reference_formats.h"

#include <gtest/gtest.h>

#include <random>

namespace mixtrain::testing {
namespace {

const RefFormat* const kFormats[] = {&kRefF16, &kRefBF16, &kRefE4M3, &kRefE5M2};

TEST(ReferenceFormats, HandComputedValues) {
  EXPECT_EQ(ref_decode(kRefF16, 0x7bff), 65504.0);
  EXPECT_EQ(ref_decode(kRefF16, 0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(ref_decode(kRefBF16, 0x7f7f), 255.0 * std::ldexp(1.0, 120));
  EXPECT_EQ(ref_decode(kRefE4M3, 0x7e), 448.0);
  EXPECT_EQ(ref_decode(kRefE4M3, 0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(ref_decode(kRefE5M2, 0x7b), 57344.0);
  EXPECT_EQ(ref_decode(kRefE5M2, 0xfc), -INFINITY);
  EXPECT_TRUE(std::isnan(ref_decode(kRefE4M3, 0xff)));
  EXPECT_EQ(ref_encode(kRefE4M3, 464.0, false), 0x7eu);
  EXPECT_EQ(ref_encode(kRefE4M3, 464.0001, false), 0x7fu);
  EXPECT_EQ(ref_encode(kRefE5M2, 61440.0, true), 0x7bu);
  EXPECT_EQ(ref_encode(kRefE5M2, 61440.0, false), 0x7cu);
  EXPECT_EQ(ref_encode(kRefF16, 65520.0, false), 0x7c00u);
}

// Around every threshold, and at random fp32 patterns, the per-value
// encoder and the segment table agree.
TEST(ReferenceFormats, EncoderAgreesWithSegments) {
  std::mt19937 rng(1);
  for (const RefFormat* f : kFormats) {
    for (bool saturate : {false, true}) {
      std::vector<Segment> segments = ref_segments(*f, saturate);
      std::vector<uint32_t> probes;
      for (const Segment& s : segments) {
        for (uint32_t bits : {s.first_magnitude_bits - 1, s.first_magnitude_bits}) {
          if (bits <= 0x7fffffffu) probes.push_back(bits);
        }
      }
      for (int i = 0; i < 100000; ++i) probes.push_back(static_cast<uint32_t>(rng()));
      for (uint32_t probe : probes) {
        for (uint32_t sign : {0u, 0x80000000u}) {
          uint32_t bits = (probe & 0x7fffffffu) | sign;
          uint32_t from_segments;
          fill_expected(*f, segments, bits, 1, &from_segments);
          ASSERT_EQ(ref_encode(*f, bits_float(bits), saturate), from_segments)
              << f->name << " fp32 0x" << std::hex << bits << (saturate ? " sat" : "");
        }
      }
    }
  }
}

}  // namespace
}  // namespace mixtrain::testing
