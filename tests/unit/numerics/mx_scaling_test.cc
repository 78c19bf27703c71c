// Why: MXFP8 must be bit-exact against the OCP MX v1.0 definition, since
// the CPU and CUDA backends and a checkpoint written by either must agree.
// The reference here is written from the specification in double
// arithmetic (reference_formats.h's per-value encoder), not from the
// engine's bit tricks: every E8M0 x element pair decodes to X * P, and
// random and special blocks quantize to the spec's scale and elements.
#include "engine/numerics/mx_scaling.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "engine/numerics/float16.h"
#include "engine/numerics/fp8_scaling.h"
#include "tests/unit/numerics/reference_formats.h"

namespace mixtrain {
namespace {

using testing::RefFormat;

struct FormatCase {
  Fp8Format format;
  const RefFormat* reference;
  int emax;  // exponent of the largest normal, from the format's max value
};

const FormatCase kFormats[] = {{Fp8Format::kE4M3, &testing::kRefE4M3, 8},
                               {Fp8Format::kE5M2, &testing::kRefE5M2, 15}};

// The spec's shared exponent: floor(log2(amax)) - emax, clamped to E8M0's
// [-127, 127]; NaN (as nullopt-like 999) for a non-finite amax.
constexpr int kNaNExponent = 999;
int reference_shared_exponent(double block_amax, int emax) {
  if (!std::isfinite(block_amax)) return kNaNExponent;
  if (block_amax == 0.0) return -127;
  return std::clamp(std::ilogb(block_amax) - emax, -127, 127);
}

TEST(E8M0, EveryCodeIsAPowerOfTwoOrNaN) {
  for (int code = 0; code < 255; ++code) {
    EXPECT_EQ(e8m0_to_float(static_cast<uint8_t>(code)), std::ldexp(1.0, code - 127)) << code;
  }
  EXPECT_TRUE(std::isnan(e8m0_to_float(kE8M0NaN)));
}

TEST(MxDequantize, AllScaleElementPairsMatchTheDefinition) {
  for (const FormatCase& f : kFormats) {
    EXPECT_EQ(fp8_emax(f.format), f.emax);
    EXPECT_EQ(std::ldexp(1.0, f.emax), std::exp2(std::floor(std::log2(testing::ref_magnitude_value(
                                           *f.reference, f.reference->max_finite_code)))));
    for (int scale = 0; scale < 256; ++scale) {
      for (int element = 0; element < 256; ++element) {
        float got = mx_dequantize_value(static_cast<uint8_t>(scale), static_cast<uint8_t>(element),
                                        f.format);
        double p = testing::ref_decode(*f.reference, static_cast<uint32_t>(element));
        if (scale == kE8M0NaN || std::isnan(p)) {
          ASSERT_TRUE(std::isnan(got)) << scale << " " << element;
          continue;
        }
        float expected = static_cast<float>(p * std::ldexp(1.0, scale - 127));
        ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(expected))
            << f.reference->name << " scale " << scale << " element " << element;
      }
    }
  }
}

// The spec's quantization of one (rows, cols) matrix, block by block.
void reference_quantize(const std::vector<float>& v, int64_t rows, int64_t cols, MxAxis axis,
                        const FormatCase& f, std::vector<uint8_t>& elements,
                        std::vector<uint8_t>& scales, int64_t& clamped) {
  elements.assign(v.size(), 0);
  scales.assign(static_cast<size_t>(mx_scale_count(rows, cols, axis)), 0);
  clamped = 0;
  bool along_rows = axis == MxAxis::kAlongRows;
  int64_t lines = along_rows ? rows : cols;
  int64_t length = along_rows ? cols : rows;
  int64_t blocks = (length + 31) / 32;
  double max_value = testing::ref_magnitude_value(*f.reference, f.reference->max_finite_code);
  for (int64_t line = 0; line < lines; ++line) {
    for (int64_t b = 0; b < blocks; ++b) {
      std::vector<size_t> at;
      for (int64_t i = b * 32; i < std::min(length, b * 32 + 32); ++i) {
        at.push_back(static_cast<size_t>(along_rows ? line * cols + i : i * cols + line));
      }
      double block_amax = 0.0;
      for (size_t k : at) {
        double x = v[k];
        block_amax = std::isnan(x) ? NAN : std::max(block_amax, std::fabs(x));
        if (std::isnan(x)) break;
      }
      int e = reference_shared_exponent(block_amax, f.emax);
      size_t scale_index = static_cast<size_t>(along_rows ? line * blocks + b : b * lines + line);
      scales[scale_index] = e == kNaNExponent ? kE8M0NaN : static_cast<uint8_t>(e + 127);
      for (size_t k : at) {
        if (e == kNaNExponent) {
          elements[k] = static_cast<uint8_t>(f.reference->nan_code);
          continue;
        }
        double quotient = static_cast<double>(v[k]) / std::ldexp(1.0, e);
        clamped += std::fabs(quotient) > max_value;
        elements[k] = static_cast<uint8_t>(testing::ref_encode(*f.reference, quotient, true));
      }
    }
  }
}

void expect_matches_reference(const std::vector<float>& v, int64_t rows, int64_t cols, MxAxis axis,
                              const FormatCase& f) {
  std::vector<uint8_t> expected_elements, expected_scales;
  int64_t expected_clamped;
  reference_quantize(v, rows, cols, axis, f, expected_elements, expected_scales, expected_clamped);
  std::vector<uint8_t> elements(v.size()), scales(expected_scales.size());
  int64_t clamped =
      mx_quantize(v.data(), rows, cols, axis, f.format, elements.data(), scales.data());
  ASSERT_EQ(scales, expected_scales) << f.reference->name;
  ASSERT_EQ(elements, expected_elements) << f.reference->name;
  EXPECT_EQ(clamped, expected_clamped);
  // Dequantizing gives X * P for every element.
  std::vector<float> back(v.size());
  mx_dequantize(elements.data(), scales.data(), rows, cols, axis, f.format, back.data());
  for (size_t k = 0; k < v.size(); ++k) {
    int64_t r = static_cast<int64_t>(k) / cols, c = static_cast<int64_t>(k) % cols;
    int64_t line = axis == MxAxis::kAlongRows ? r : c;
    int64_t block = (axis == MxAxis::kAlongRows ? c : r) / 32;
    int64_t blocks = (axis == MxAxis::kAlongRows ? cols + 31 : rows + 31) / 32;
    uint8_t code = scales[static_cast<size_t>(axis == MxAxis::kAlongRows ? line * blocks + block
                                                                         : block * cols + line)];
    float expected = mx_dequantize_value(code, elements[k], f.format);
    ASSERT_TRUE(std::bit_cast<uint32_t>(back[k]) == std::bit_cast<uint32_t>(expected) ||
                (std::isnan(back[k]) && std::isnan(expected)));
  }
}

TEST(MxQuantize, RandomMatricesBothAxesMatchTheSpec) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-140, 120);
  for (const FormatCase& f : kFormats) {
    // 45 columns and 70 rows leave short last blocks on both axes; 300 x
    // 257 too, past the size (2^16) that splits the work across threads.
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{64, 96}, {70, 45}, {300, 257}}) {
      std::vector<float> v(static_cast<size_t>(rows * cols));
      for (size_t k = 0; k < v.size(); ++k) {
        // Each element's magnitude from a wide range of binades, so blocks
        // mix values far below their amax with ones near it.
        v[k] = std::ldexp(normal(rng), k % 7 == 0 ? exponent(rng) : exponent(rng) / 8);
      }
      expect_matches_reference(v, rows, cols, MxAxis::kAlongRows, f);
      expect_matches_reference(v, rows, cols, MxAxis::kAlongColumns, f);
    }
  }
}

TEST(MxQuantize, SpecialBlocks) {
  for (const FormatCase& f : kFormats) {
    const float max_value = fp8_max(f.format);
    std::vector<std::vector<float>> blocks = {
        std::vector<float>(32, 0.0f),                         // all zero: 2^-127
        std::vector<float>(32, -0.0f),                        // signs of zero kept
        {1.0f, NAN, 3.0f},                                    // NaN: NaN scale
        {1.0f, -INFINITY, 3.0f},                              // inf: NaN scale
        {std::ldexp(1.99f, f.emax), 1.0f, -1e-3f},            // amax past max: clamped
        {3.0e38f, -1.0f, 1e-30f},                             // scale 2^(127 - emax)
        {std::ldexp(1.0f, -140), std::ldexp(1.0f, -149)},     // subnormal amax: 2^-127
        {max_value, -max_value, std::ldexp(max_value, -20)},  // exactly max: no clamp
    };
    for (std::vector<float> block : blocks) {
      block.resize(32, 0.25f * block[0]);
      expect_matches_reference(block, 1, 32, MxAxis::kAlongRows, f);
      expect_matches_reference(block, 32, 1, MxAxis::kAlongColumns, f);
    }
    uint8_t elements[32], scale;
    std::vector<float> over(32, std::ldexp(1.99f, f.emax));
    EXPECT_EQ(mx_quantize(over.data(), 1, 32, MxAxis::kAlongRows, f.format, elements, &scale), 32);
    EXPECT_EQ(scale, 127);
    std::vector<float> zeros(32, 0.0f);
    mx_quantize(zeros.data(), 1, 32, MxAxis::kAlongRows, f.format, elements, &scale);
    EXPECT_EQ(scale, 0);
    std::vector<float> with_nan(32, 1.0f);
    with_nan[5] = NAN;
    mx_quantize(with_nan.data(), 1, 32, MxAxis::kAlongRows, f.format, elements, &scale);
    EXPECT_EQ(scale, kE8M0NaN);
    EXPECT_TRUE(std::isnan(mx_dequantize_value(scale, elements[0], f.format)));
  }
}

TEST(MxQuantize, SixteenBitInputsQuantizeAsTheirFp32Values) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<BFloat16> bf16(64 * 32);
  std::vector<float> widened(bf16.size());
  for (size_t k = 0; k < bf16.size(); ++k) {
    bf16[k] = from_float<BFloat16>(normal(rng));
    widened[k] = to_float(bf16[k]);
  }
  std::vector<uint8_t> a(bf16.size()), b(bf16.size()), sa(64), sb(64);
  mx_quantize(bf16.data(), 64, 32, MxAxis::kAlongColumns, Fp8Format::kE4M3, a.data(), sa.data());
  mx_quantize(widened.data(), 64, 32, MxAxis::kAlongColumns, Fp8Format::kE4M3, b.data(), sb.data());
  EXPECT_EQ(a, b);
  EXPECT_EQ(sa, sb);
}

// Why block scaling exists: one outlier sets a per-tensor scale that
// leaves the small values below E4M3's smallest subnormal, so they become
// zero; with MX blocks only the outlier's own block of 32 is affected.
TEST(MxQuantize, AnOutlierFlushesPerTensorButOnlyItsBlockInMx) {
  constexpr int64_t kRows = 64, kCols = 256;
  std::mt19937 rng(5);
  std::normal_distribution<float> small(0.0f, 1e-3f);
  std::vector<float> x(static_cast<size_t>(kRows * kCols));
  for (float& v : x) v = small(rng);
  x[1000] = 1000.0f;  // one activation outlier
  auto zero_fraction = [&](const std::vector<float>& back) {
    int64_t zeroed = 0, nonzero = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i] == 0.0f) continue;
      ++nonzero;
      zeroed += back[i] == 0.0f;
    }
    return static_cast<double>(zeroed) / static_cast<double>(nonzero);
  };
  // Per tensor: scale = 448 / amax, the values come back as code / scale.
  const float scale = fp8_scale(amax(x.data(), x.size()), Fp8Format::kE4M3);
  std::vector<uint8_t> codes(x.size());
  quantize_fp8(x.data(), x.size(), scale, Fp8Format::kE4M3, codes.data());
  std::vector<float> per_tensor(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    per_tensor[i] = fp8_to_float(codes[i], Fp8Format::kE4M3) / scale;
  // MX along rows.
  std::vector<uint8_t> scales(
      static_cast<size_t>(mx_scale_count(kRows, kCols, MxAxis::kAlongRows)));
  mx_quantize(x.data(), kRows, kCols, MxAxis::kAlongRows, Fp8Format::kE4M3, codes.data(),
              scales.data());
  std::vector<float> blocked(x.size());
  mx_dequantize(codes.data(), scales.data(), kRows, kCols, MxAxis::kAlongRows, Fp8Format::kE4M3,
                blocked.data());
  const double per_tensor_zeroed = zero_fraction(per_tensor);
  const double mx_zeroed = zero_fraction(blocked);
  std::printf(
      "one outlier (1000) among N(0, 1e-3) values: per-tensor E4M3 flushes %.1f%% to "
      "zero, MXFP8 %.2f%%\n",
      100 * per_tensor_zeroed, 100 * mx_zeroed);
  ::testing::Test::RecordProperty("per_tensor_zeroed_percent",
                                  std::to_string(100 * per_tensor_zeroed));
  ::testing::Test::RecordProperty("mx_zeroed_percent", std::to_string(100 * mx_zeroed));
  EXPECT_GT(per_tensor_zeroed, 0.9);
  EXPECT_LT(mx_zeroed, 32.0 / static_cast<double>(x.size()));  // at most the outlier's block
}

}  // namespace
}  // namespace mixtrain
