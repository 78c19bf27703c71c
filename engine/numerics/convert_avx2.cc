// Why: the conversion loops for AVX2 + F16C CPUs without AVX-512, 8-16
// lanes per step; the last partial step runs the portable loop (AVX2 has
// no 8/16-bit masked stores). Only these functions carry the AVX2 target,
// and convert() calls them only when cpu_features() says so. The methods
// are those of convert_avx512.cc: exact integer work or instructions with
// an explicit rounding immediate, so MXCSR cannot change a result.
#include <immintrin.h>

#include <cstdint>

#include "engine/numerics/convert_kernels.h"
#include "engine/numerics/fp8.h"

#define MIXTRAIN_TARGET_AVX2 __attribute__((target("avx2,f16c")))

namespace mixtrain::convert_detail {
namespace {

MIXTRAIN_TARGET_AVX2 void f16_to_f32(const void* src, void* dst, size_t n) {
  const auto* in = static_cast<const uint16_t*>(src);
  auto* out = static_cast<float*>(dst);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  portable_kernels().f16_to_f32(in + i, out + i, n - i);
}

MIXTRAIN_TARGET_AVX2 void bf16_to_f32(const void* src, void* dst, size_t n) {
  const auto* in = static_cast<const uint16_t*>(src);
  auto* out = static_cast<float*>(dst);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    __m256i bits = _mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), bits);
  }
  portable_kernels().bf16_to_f32(in + i, out + i, n - i);
}

MIXTRAIN_TARGET_AVX2 void e5m2_to_f32(const void* src, void* dst, size_t n) {
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<float*>(dst);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i codes = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + i)));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_slli_epi16(codes, 8)));
  }
  portable_kernels().e5m2_to_f32(in + i, out + i, n - i);
}

MIXTRAIN_TARGET_AVX2 void e4m3_to_f32(const void* src, void* dst, size_t n) {
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<float*>(dst);
  const __m128i magnitude_mask = _mm_set1_epi16(0x7f);
  const __m128i sign_mask = _mm_set1_epi16(0x80);
  const __m256 two_pow_8 = _mm256_set1_ps(256.0f);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 nan_code_value = _mm256_set1_ps(480.0f);  // what 0x7f decodes to as a number
  const __m256 quiet_nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i codes = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + i)));
    // S.EEEE.MMM -> fp16 S.0EEEE.MMM0000000: same bits, bias 15 instead of 7.
    __m128i half = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(codes, magnitude_mask), 7),
                                _mm_slli_epi16(_mm_and_si128(codes, sign_mask), 8));
    __m256 value = _mm256_mul_ps(_mm256_cvtph_ps(half), two_pow_8);
    __m256 magnitude = _mm256_and_ps(value, abs_mask);
    __m256 nan = _mm256_cmp_ps(magnitude, nan_code_value, _CMP_EQ_OQ);
    __m256 signed_nan = _mm256_or_ps(_mm256_andnot_ps(abs_mask, value), quiet_nan);
    _mm256_storeu_ps(out + i, _mm256_blendv_ps(value, signed_nan, nan));
  }
  portable_kernels().e4m3_to_f32(in + i, out + i, n - i);
}

MIXTRAIN_TARGET_AVX2 void f32_to_f16(const void* src, void* dst, size_t n, bool saturate_fp8) {
  const auto* in = static_cast<const float*>(src);
  auto* out = static_cast<uint16_t*>(dst);
  const __m128i canonical_nan = _mm_set1_epi16(0x7fff);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_loadu_ps(in + i);
    __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256i nan32 = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    __m128i nan16 =
        _mm_packs_epi32(_mm256_castsi256_si128(nan32), _mm256_extracti128_si256(nan32, 1));
    h = _mm_blendv_epi8(h, canonical_nan, nan16);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  portable_kernels().f32_to_f16(in + i, out + i, n - i, saturate_fp8);
}

// fp32 bits -> bf16 in the low 16 bits of each lane (nearest even, NaN ->
// the canonical 0x7FFF).
MIXTRAIN_TARGET_AVX2 inline __m256i round_to_bf16(__m256i x) {
  __m256i ax = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
  __m256i nan = _mm256_cmpgt_epi32(ax, _mm256_set1_epi32(0x7f800000));
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  __m256i rounded = _mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  return _mm256_blendv_epi8(_mm256_srli_epi32(rounded, 16), _mm256_set1_epi32(0x7fff), nan);
}

MIXTRAIN_TARGET_AVX2 void f32_to_bf16(const void* src, void* dst, size_t n, bool saturate_fp8) {
  const auto* in = static_cast<const float*>(src);
  auto* out = static_cast<uint16_t*>(dst);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i low = round_to_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
    __m256i high = round_to_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i + 8)));
    // packus works per 128-bit half: (l0-3, h0-3, l4-7, h4-7); restore order.
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(low, high), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
  portable_kernels().f32_to_bf16(in + i, out + i, n - i, saturate_fp8);
}

// The constants of fp8_detail::Encoding (fp8.h), as lane-wide vectors. All bit
// patterns compared are below 2^31, so signed compares are exact.
struct Fp8Lanes {
  int drop;                      // fp32 mantissa bits rounded away
  __m256i min_normal;            // fp32 bits of the smallest normal fp8
  __m256i overflow;              // first overflowing |x| bits
  __m256i rebias;                // (127 - fp8 bias) << 23
  __m256i subnormal_shift_base;  // shift = base - fp32 exponent
  __m256i overflow_code;         // max (saturating) or NaN/inf code
  __m256i nan_code;
};

MIXTRAIN_TARGET_AVX2 __m256i encode_fp8(__m256i x, const Fp8Lanes& f) {
  const __m256i one = _mm256_set1_epi32(1);
  __m256i ax = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
  __m256i sign = _mm256_and_si256(_mm256_srli_epi32(x, 24), _mm256_set1_epi32(0x80));
  const __m128i drop = _mm_cvtsi32_si128(f.drop);
  // Normal range: round the dropped bits to nearest even, rebias.
  __m256i lsb = _mm256_and_si256(_mm256_srl_epi32(ax, drop), one);
  __m256i rounded =
      _mm256_add_epi32(ax, _mm256_add_epi32(_mm256_set1_epi32((1 << (f.drop - 1)) - 1), lsb));
  __m256i code = _mm256_srl_epi32(_mm256_sub_epi32(rounded, f.rebias), drop);
  // Subnormal range: per-lane shift of the full significand, nearest even.
  // Shifts of 32 or more give 0.
  __m256i shift = _mm256_sub_epi32(f.subnormal_shift_base, _mm256_srli_epi32(ax, 23));
  __m256i significand = _mm256_or_si256(_mm256_and_si256(ax, _mm256_set1_epi32(0x7fffff)),
                                        _mm256_set1_epi32(0x800000));
  __m256i half_minus_one =
      _mm256_sub_epi32(_mm256_sllv_epi32(one, _mm256_sub_epi32(shift, one)), one);
  __m256i sub_lsb = _mm256_and_si256(_mm256_srlv_epi32(significand, shift), one);
  __m256i sub_code = _mm256_srlv_epi32(
      _mm256_add_epi32(significand, _mm256_add_epi32(half_minus_one, sub_lsb)), shift);
  code = _mm256_blendv_epi8(code, sub_code, _mm256_cmpgt_epi32(f.min_normal, ax));
  __m256i overflow = _mm256_cmpgt_epi32(ax, _mm256_sub_epi32(f.overflow, one));
  code = _mm256_blendv_epi8(code, f.overflow_code, overflow);
  __m256i nan = _mm256_cmpgt_epi32(ax, _mm256_set1_epi32(0x7f800000));
  code = _mm256_or_si256(code, _mm256_andnot_si256(nan, sign));  // NaN is unsigned
  return _mm256_blendv_epi8(code, f.nan_code, nan);
}

MIXTRAIN_TARGET_AVX2 void f32_to_fp8(const float* in, uint8_t* out, size_t n, const Fp8Lanes& f) {
  for (size_t i = 0; i + 8 <= n; i += 8) {
    __m256i code = encode_fp8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)), f);
    __m128i words =
        _mm_packus_epi32(_mm256_castsi256_si128(code), _mm256_extracti128_si256(code, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), _mm_packus_epi16(words, words));
  }
}

MIXTRAIN_TARGET_AVX2 Fp8Lanes fp8_lanes(const fp8_detail::Encoding& e, bool saturate) {
  return Fp8Lanes{static_cast<int>(23 - e.mantissa_bits),
                  _mm256_set1_epi32(static_cast<int>(e.min_normal_bits)),
                  _mm256_set1_epi32(static_cast<int>(e.overflow_bits)),
                  _mm256_set1_epi32(static_cast<int>(e.exponent_rebias)),
                  _mm256_set1_epi32(static_cast<int>(e.subnormal_shift_base)),
                  _mm256_set1_epi32(static_cast<int>(saturate ? e.max_code : e.overflow_code)),
                  _mm256_set1_epi32(static_cast<int>(e.nan_code))};
}

MIXTRAIN_TARGET_AVX2 void f32_to_e4m3(const void* src, void* dst, size_t n, bool saturate) {
  const Fp8Lanes lanes = fp8_lanes(fp8_detail::kE4M3, saturate);
  size_t vector_part = n - n % 8;
  f32_to_fp8(static_cast<const float*>(src), static_cast<uint8_t*>(dst), vector_part, lanes);
  portable_kernels().f32_to_e4m3(static_cast<const float*>(src) + vector_part,
                                 static_cast<uint8_t*>(dst) + vector_part, n - vector_part,
                                 saturate);
}

MIXTRAIN_TARGET_AVX2 void f32_to_e5m2(const void* src, void* dst, size_t n, bool saturate) {
  const Fp8Lanes lanes = fp8_lanes(fp8_detail::kE5M2, saturate);
  size_t vector_part = n - n % 8;
  f32_to_fp8(static_cast<const float*>(src), static_cast<uint8_t*>(dst), vector_part, lanes);
  portable_kernels().f32_to_e5m2(static_cast<const float*>(src) + vector_part,
                                 static_cast<uint8_t*>(dst) + vector_part, n - vector_part,
                                 saturate);
}

}  // namespace

const ConvertKernels& avx2_kernels() {
  static constexpr ConvertKernels kernels{f16_to_f32, bf16_to_f32, e4m3_to_f32, e5m2_to_f32,
                                          f32_to_f16, f32_to_bf16, f32_to_e4m3, f32_to_e5m2};
  return kernels;
}

}  // namespace mixtrain::convert_detail
