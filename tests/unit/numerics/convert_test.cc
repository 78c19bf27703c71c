// Why: convert() must give the scalar functions' bits whichever ISA path
// runs, for every dtype pair, including the tails of vector loops,
// unaligned pointers and the multi-threaded split. The expected output is
// the scalar conversion element by element.
#include "engine/numerics/convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/numerics/convert_kernels.h"
#include "engine/numerics/float16.h"
#include "engine/numerics/fp8.h"
#include "reference_formats.h"

namespace mixtrain::testing {
namespace {

using convert_detail::ConvertIsa;

const DType kFloatTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kFP8E4M3,
                             DType::kFP8E5M2};

// One element of `type` at bytes p -> fp32, and back, by the scalar functions.
float scalar_load(const uint8_t* p, DType type) {
  uint16_t bits16;
  switch (type) {
    case DType::kF32: {
      float x;
      std::memcpy(&x, p, sizeof(x));
      return x;
    }
    case DType::kF16: std::memcpy(&bits16, p, 2); return half_bits_to_float(bits16);
    case DType::kBF16: std::memcpy(&bits16, p, 2); return bf16_bits_to_float(bits16);
    case DType::kFP8E4M3: return fp8_to_float(*p, Fp8Format::kE4M3);
    case DType::kFP8E5M2: return fp8_to_float(*p, Fp8Format::kE5M2);
    default: break;
  }
  ADD_FAILURE() << "not a float type";
  return 0;
}

void scalar_store(float x, DType type, bool saturate, uint8_t* p) {
  uint16_t bits16;
  switch (type) {
    case DType::kF32: std::memcpy(p, &x, sizeof(x)); return;
    case DType::kF16:
      bits16 = float_to_half_bits(x);
      std::memcpy(p, &bits16, 2);
      return;
    case DType::kBF16:
      bits16 = float_to_bf16_bits(x);
      std::memcpy(p, &bits16, 2);
      return;
    case DType::kFP8E4M3: *p = float_to_fp8(x, Fp8Format::kE4M3, saturate); return;
    case DType::kFP8E5M2: *p = float_to_fp8(x, Fp8Format::kE5M2, saturate); return;
    default: ADD_FAILURE() << "not a float type";
  }
}

// Same-type conversion is a byte copy (NaN payloads untouched).
std::vector<uint8_t> scalar_convert(const uint8_t* src, DType src_type, DType dst_type, size_t n,
                                    bool saturate) {
  if (src_type == dst_type) return std::vector<uint8_t>(src, src + n * dtype_size(src_type));
  std::vector<uint8_t> out(n * dtype_size(dst_type));
  for (size_t i = 0; i < n; ++i) {
    float x = scalar_load(src + i * dtype_size(src_type), src_type);
    scalar_store(x, dst_type, saturate, out.data() + i * dtype_size(dst_type));
  }
  return out;
}

// fp32 values worth converting: every edge of every format, then random
// values spread over many binades, then random bit patterns (NaNs too).
std::vector<float> interesting_floats(size_t n, uint32_t seed) {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          448.0f,
                          464.0f,
                          465.0f,
                          -480.0f,
                          57344.0f,
                          61439.0f,
                          61440.0f,
                          65504.0f,
                          65519.996f,
                          65520.0f,
                          1e30f,
                          -1e30f,
                          INFINITY,
                          -INFINITY,
                          NAN,
                          -NAN,
                          std::ldexp(1.0f, -9),
                          std::ldexp(1.0f, -10),
                          std::ldexp(3.0f, -10),
                          std::ldexp(1.0f, -16),
                          std::ldexp(1.0f, -17),
                          std::ldexp(1.0f, -24),
                          std::ldexp(1.0f, -25),
                          std::ldexp(3.0f, -25),
                          std::ldexp(1.0f, -14),
                          std::ldexp(1.0f, -6),
                          1.0f + std::ldexp(1.0f, -11),
                          1.0f + 3 * std::ldexp(1.0f, -11),
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::denorm_min(),
                          bits_float(0x7f7f8000u),
                          bits_float(0x00018000u),
                          bits_float(0x7f800001u),
                          bits_float(0xffc00123u)};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(-2.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-30, 20);
  while (v.size() < n / 2) v.push_back(std::ldexp(mantissa(rng), exponent(rng)));
  while (v.size() < n) v.push_back(bits_float(static_cast<uint32_t>(rng())));
  v.resize(n);
  return v;
}

// n source elements of `type`: interesting fp32 values for fp32, uniformly
// random codes (NaN and inf codes included) for the narrow formats.
std::vector<uint8_t> make_source(DType type, size_t n, uint32_t seed) {
  std::vector<uint8_t> bytes(n * dtype_size(type));
  if (type == DType::kF32) {
    std::vector<float> v = interesting_floats(n, seed);
    std::memcpy(bytes.data(), v.data(), bytes.size());
  } else {
    std::mt19937 rng(seed);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  }
  return bytes;
}

std::vector<ConvertIsa> available_isas() {
  std::vector<ConvertIsa> isas;
  for (ConvertIsa isa : {ConvertIsa::kPortable, ConvertIsa::kAvx2, ConvertIsa::kAvx512}) {
    if (convert_detail::convert_isa_available(isa)) isas.push_back(isa);
  }
  return isas;
}

std::string describe(ConvertIsa isa, DType src, DType dst, size_t n, bool saturate) {
  return std::string(convert_detail::convert_isa_name(isa)) + " " + dtype_name(src) + " -> " +
         dtype_name(dst) + " n=" + std::to_string(n) + (saturate ? " sat" : " nosat");
}

// Converts with every available ISA at the given byte offsets from aligned
// storage and compares with the scalar result.
void check_pair(DType src_type, DType dst_type, size_t n, size_t src_offset, size_t dst_offset,
                bool saturate) {
  std::vector<uint8_t> source = make_source(src_type, n, static_cast<uint32_t>(n * 31 + 7));
  std::vector<uint8_t> expected = scalar_convert(source.data(), src_type, dst_type, n, saturate);
  std::vector<uint8_t> src_storage(source.size() + 64);
  std::memcpy(src_storage.data() + src_offset, source.data(), source.size());
  const size_t dst_bytes = n * dtype_size(dst_type);
  constexpr uint8_t kGuard = 0xa5;
  for (ConvertIsa isa : available_isas()) {
    std::vector<uint8_t> dst_storage(dst_bytes + 128, kGuard);
    uint8_t* dst = dst_storage.data() + 64 + dst_offset;
    convert_detail::convert_using(isa, src_storage.data() + src_offset, src_type, dst, dst_type, n,
                                  saturate);
    std::string what = describe(isa, src_type, dst_type, n, saturate) + " offsets " +
                       std::to_string(src_offset) + "/" + std::to_string(dst_offset);
    ASSERT_EQ(std::memcmp(dst, expected.data(), dst_bytes), 0) << what;
    for (size_t i = 0; i < 64 + dst_offset; ++i) ASSERT_EQ(dst_storage[i], kGuard) << what;
    for (size_t i = 64 + dst_offset + dst_bytes; i < dst_storage.size(); ++i) {
      ASSERT_EQ(dst_storage[i], kGuard) << what << ": wrote past the end";
    }
  }
}

TEST(Convert, EveryPairEveryIsaMatchesScalarIncludingTails) {
  // Sizes around the 8/16/32-lane steps, and one above the threading
  // threshold with a ragged last chunk.
  const size_t sizes[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 65, 1000, 4099, 200003};
  for (DType src : kFloatTypes) {
    for (DType dst : kFloatTypes) {
      for (size_t n : sizes) {
        for (bool saturate : {true, false}) check_pair(src, dst, n, 0, 0, saturate);
      }
    }
  }
}

// Every 16-bit pattern and every fp8 code, widened to fp32 (and narrowed
// to every other format) by each ISA, gives the scalar functions' bits.
TEST(Convert, EveryNarrowCodeMatchesScalarOnEveryIsa) {
  const struct {
    DType type;
    size_t codes;
  } narrow[] = {
      {DType::kF16, 65536}, {DType::kBF16, 65536}, {DType::kFP8E4M3, 256}, {DType::kFP8E5M2, 256}};
  for (const auto& src : narrow) {
    std::vector<uint8_t> all(src.codes * dtype_size(src.type));
    for (size_t code = 0; code < src.codes; ++code) {
      std::memcpy(all.data() + code * dtype_size(src.type), &code, dtype_size(src.type));
    }
    for (DType dst : kFloatTypes) {
      std::vector<uint8_t> expected =
          scalar_convert(all.data(), src.type, dst, src.codes, /*saturate=*/false);
      for (ConvertIsa isa : available_isas()) {
        std::vector<uint8_t> got(src.codes * dtype_size(dst));
        convert_detail::convert_using(isa, all.data(), src.type, got.data(), dst, src.codes, false);
        EXPECT_EQ(got, expected) << describe(isa, src.type, dst, src.codes, false);
      }
    }
  }
}

TEST(Convert, UnalignedPointersMatchScalar) {
  for (DType src : kFloatTypes) {
    for (DType dst : kFloatTypes) {
      for (size_t src_offset : {1, 2, 3, 6}) {
        check_pair(src, dst, 1021, src_offset, (src_offset * 5) % 7, true);
      }
    }
  }
}

TEST(Convert, PublicEntryPointUsesOptions) {
  std::vector<float> x = {1000.0f, -INFINITY, 1.0f};
  std::vector<uint8_t> out(3);
  convert(x.data(), DType::kF32, out.data(), DType::kFP8E4M3, 3);
  EXPECT_EQ(out, (std::vector<uint8_t>{0x7e, 0xfe, 0x38}));
  convert(x.data(), DType::kF32, out.data(), DType::kFP8E4M3, 3, {.saturate_fp8 = false});
  EXPECT_EQ(out, (std::vector<uint8_t>{0x7f, 0xff, 0x38}));
}

TEST(Convert, InPlaceBetweenSameSizedTypes) {
  std::vector<uint8_t> source = make_source(DType::kF16, 100003, 5);
  std::vector<uint8_t> expected =
      scalar_convert(source.data(), DType::kF16, DType::kBF16, 100003, true);
  convert(source.data(), DType::kF16, source.data(), DType::kBF16, 100003);
  EXPECT_EQ(source, expected);
  convert(source.data(), DType::kBF16, source.data(), DType::kBF16, 100003);  // no-op
  EXPECT_EQ(source, expected);
}

TEST(Convert, RejectsNonFloatTypes) {
  int32_t ids[2] = {1, 2};
  float out[2];
  EXPECT_THROW(convert(ids, DType::kI32, out, DType::kF32, 2), EngineError);
  EXPECT_THROW(convert(out, DType::kF32, ids, DType::kI32, 2), EngineError);
}

TEST(Convert, BestIsaIsAvailable) {
  EXPECT_TRUE(convert_detail::convert_isa_available(convert_detail::best_convert_isa()));
  std::printf("convert() uses the %s kernels on this CPU\n",
              convert_detail::convert_isa_name(convert_detail::best_convert_isa()));
}

}  // namespace
}  // namespace mixtrain::testing
