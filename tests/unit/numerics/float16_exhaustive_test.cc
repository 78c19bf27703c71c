// Why: fp32 -> fp16 / bf16 is on every step's path, and rounding bugs hide
// in rare corners (ties, subnormal edges, overflow). So every one of the
// 2^32 fp32 patterns is checked: the scalar functions and every bulk path
// this CPU can run (convert() uses the widest of them) against the
// arithmetic reference (reference_formats.h), and, for fp16, against the
// CPU's own F16C conversion.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <vector>

#include "engine/common/cpu_features.h"
#include "exhaustive_sweep.h"
#include "engine/numerics/convert_kernels.h"
#include "engine/numerics/float16.h"
#include "reference_formats.h"

namespace mixtrain::testing {
namespace {

using convert_detail::ConvertIsa;

// The scalar functions over a chunk; the compiler may vectorize the loops
// (per-ISA clones), which keeps the sweep to seconds without changing what
// is computed.
MIXTRAIN_MULTIVERSION void scalar_f16(const uint32_t* inputs, uint16_t* out) {
  for (size_t i = 0; i < kSweepChunk; ++i) out[i] = float_to_half_bits(bits_float(inputs[i]));
}
MIXTRAIN_MULTIVERSION void scalar_bf16(const uint32_t* inputs, uint16_t* out) {
  for (size_t i = 0; i < kSweepChunk; ++i) out[i] = float_to_bf16_bits(bits_float(inputs[i]));
}

// The CPU's fp32 -> fp16 (VCVTPS2PH, round to nearest even); count % 8 == 0.
__attribute__((target("avx,f16c"))) void f16c_convert(const uint32_t* in, uint16_t* out,
                                                      size_t count) {
  for (size_t i = 0; i < count; i += 8) {
    __m256 x = _mm256_loadu_ps(reinterpret_cast<const float*>(in + i));
    __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
}

bool is_f32_nan(uint32_t bits) { return (bits & 0x7fffffffu) > 0x7f800000u; }
bool is_f16_nan(uint16_t bits) { return (bits & 0x7fffu) > 0x7c00u; }

// F16C must agree with us on every non-NaN input. For NaN inputs it keeps
// the payload (truncated) and sign, while CUDA's __float2half_rn and we
// return the canonical 0x7FFF; both must be NaN.
bool disagrees_with_f16c(uint32_t input, uint16_t ours, uint16_t f16c) {
  bool nan_input = is_f32_nan(input);
  return (nan_input & !(is_f16_nan(ours) & is_f16_nan(f16c))) | (!nan_input & (ours != f16c));
}

void compare_with_f16c(uint32_t begin_bits, const uint32_t* inputs, const uint16_t* ours,
                       const uint16_t* f16c, MismatchLog& log) {
  size_t disagreements = 0;  // counted branch-free first: the common case is 0
  for (size_t i = 0; i < kSweepChunk; ++i) {
    disagreements += disagrees_with_f16c(inputs[i], ours[i], f16c[i]);
  }
  if (disagreements == 0) return;
  for (size_t i = 0; i < kSweepChunk; ++i) {
    if (disagrees_with_f16c(inputs[i], ours[i], f16c[i])) {
      log.record("F16C", begin_bits + static_cast<uint32_t>(i), ours[i], f16c[i]);
    }
  }
}

TEST(Float16Exhaustive, EveryFp32ToFp16MatchesReferenceScalarBulkAndF16c) {
  const std::vector<Segment> segments = ref_segments(kRefF16, /*saturate=*/false);
  const std::vector<ConvertIsa> isas = vector_isas_to_check();
  const bool has_f16c = cpu_features().f16c;
  MismatchLog log;
  double seconds = sweep_all_fp32([&](uint32_t begin, const uint32_t* inputs) {
    thread_local std::vector<uint16_t> expected(kSweepChunk), got(kSweepChunk),
        hardware(kSweepChunk);
    fill_expected(kRefF16, segments, begin, kSweepChunk, expected.data());
    scalar_f16(inputs, got.data());
    compare_codes("scalar", begin, got.data(), expected.data(), kSweepChunk, log);
    for (ConvertIsa isa : isas) {
      convert_detail::convert_using(isa, inputs, DType::kF32, got.data(), DType::kF16, kSweepChunk,
                                    true);
      compare_codes(convert_detail::convert_isa_name(isa), begin, got.data(), expected.data(),
                    kSweepChunk, log);
    }
    if (has_f16c) {
      f16c_convert(inputs, hardware.data(), kSweepChunk);
      compare_with_f16c(begin, inputs, expected.data(), hardware.data(), log);
    }
  });
  report_sweep_time("fp32->fp16 (scalar + bulk paths + F16C)", seconds);
  if (!has_f16c) std::printf("note: no F16C on this CPU, hardware comparison skipped\n");
  EXPECT_EQ(log.count(), 0u) << log.examples();
}

TEST(Float16Exhaustive, EveryFp32ToBf16MatchesReferenceScalarAndBulk) {
  const std::vector<Segment> segments = ref_segments(kRefBF16, /*saturate=*/false);
  const std::vector<ConvertIsa> isas = vector_isas_to_check();
  MismatchLog log;
  double seconds = sweep_all_fp32([&](uint32_t begin, const uint32_t* inputs) {
    thread_local std::vector<uint16_t> expected(kSweepChunk), got(kSweepChunk);
    fill_expected(kRefBF16, segments, begin, kSweepChunk, expected.data());
    scalar_bf16(inputs, got.data());
    compare_codes("scalar", begin, got.data(), expected.data(), kSweepChunk, log);
    for (ConvertIsa isa : isas) {
      convert_detail::convert_using(isa, inputs, DType::kF32, got.data(), DType::kBF16, kSweepChunk,
                                    true);
      compare_codes(convert_detail::convert_isa_name(isa), begin, got.data(), expected.data(),
                    kSweepChunk, log);
    }
  });
  report_sweep_time("fp32->bf16 (scalar + bulk paths)", seconds);
  EXPECT_EQ(log.count(), 0u) << log.examples();
}

}  // namespace
}  // namespace mixtrain::testing
