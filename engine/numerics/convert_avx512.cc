// Why: the conversion loops for AVX-512 (F+BW+VL) CPUs, 16-32 lanes per
// step with masked loads/stores for the tail, so no scalar remainder loop
// is needed. Compiled for the baseline ISA; only these functions carry the
// AVX-512 target, and convert() calls them only when cpu_features() says
// so. Every path is exact integer work or an instruction with an explicit
// rounding immediate, so MXCSR (rounding mode, FTZ, DAZ) cannot change a
// result, and each lane equals the scalar function in float16.h / fp8.h:
//  * fp32 -> bf16: integer round-to-nearest-even. Not VCVTNEPS2BF16, which
//    flushes fp32 subnormal inputs to zero.
//  * fp32 -> fp16: VCVTPS2PH, then NaN lanes replaced by the canonical 0x7FFF
//    (the instruction keeps the NaN's payload).
//  * fp16 -> fp32: VCVTPH2PS (keeps NaN sign and payload, quiets it).
//  * fp8 -> fp32: E5M2 is the top byte of an fp16; E4M3 is rebiased into an
//    fp16 (its value times 2^-8), widened, and multiplied by 2^8 exactly.
//  * fp32 -> fp8: the integer algorithm of fp8.h, lane by lane.
#include <cstdint>

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized misreports (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "engine/numerics/convert_kernels.h"
#include "engine/numerics/fp8.h"

#define MIXTRAIN_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))

namespace mixtrain::convert_detail {
namespace {

// Lanes [0, count) of a 16- or 32-lane step.
MIXTRAIN_TARGET_AVX512 inline __mmask16 mask16(size_t count) {
  return count >= 16 ? __mmask16(0xffff) : __mmask16((1u << count) - 1u);
}
MIXTRAIN_TARGET_AVX512 inline __mmask32 mask32(size_t count) {
  return count >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << count) - 1u);
}

MIXTRAIN_TARGET_AVX512 void f16_to_f32(const void* src, void* dst, size_t n) {
  const auto* in = static_cast<const uint16_t*>(src);
  auto* out = static_cast<float*>(dst);
  for (size_t i = 0; i < n; i += 16) {
    __mmask16 m = mask16(n - i);
    __m256i h = _mm256_maskz_loadu_epi16(m, in + i);
    _mm512_mask_storeu_ps(out + i, m, _mm512_cvtph_ps(h));
  }
}

MIXTRAIN_TARGET_AVX512 void bf16_to_f32(const void* src, void* dst, size_t n) {
  const auto* in = static_cast<const uint16_t*>(src);
  auto* out = static_cast<float*>(dst);
  for (size_t i = 0; i < n; i += 16) {
    __mmask16 m = mask16(n - i);
    __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, in + i));
    _mm512_mask_storeu_epi32(out + i, m, _mm512_slli_epi32(wide, 16));
  }
}

MIXTRAIN_TARGET_AVX512 void e5m2_to_f32(const void* src, void* dst, size_t n) {
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<float*>(dst);
  for (size_t i = 0; i < n; i += 16) {
    __mmask16 m = mask16(n - i);
    __m256i codes = _mm256_cvtepu8_epi16(_mm_maskz_loadu_epi8(m, in + i));
    _mm512_mask_storeu_ps(out + i, m, _mm512_cvtph_ps(_mm256_slli_epi16(codes, 8)));
  }
}

MIXTRAIN_TARGET_AVX512 void e4m3_to_f32(const void* src, void* dst, size_t n) {
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<float*>(dst);
  const __m256i magnitude_mask = _mm256_set1_epi16(0x7f);
  const __m256i sign_mask = _mm256_set1_epi16(0x80);
  const __m512 two_pow_8 = _mm512_set1_ps(256.0f);
  const __m512i f32_sign = _mm512_set1_epi32(int32_t(0x80000000u));
  const __m512i quiet_nan = _mm512_set1_epi32(0x7fc00000);
  for (size_t i = 0; i < n; i += 16) {
    __mmask16 m = mask16(n - i);
    __m256i codes = _mm256_cvtepu8_epi16(_mm_maskz_loadu_epi8(m, in + i));
    __m256i magnitude = _mm256_and_si256(codes, magnitude_mask);
    // S.EEEE.MMM -> fp16 S.0EEEE.MMM0000000: same bits, bias 15 instead of 7.
    __m256i half = _mm256_or_si256(_mm256_slli_epi16(magnitude, 7),
                                   _mm256_slli_epi16(_mm256_and_si256(codes, sign_mask), 8));
    __m512 value = _mm512_mul_ps(_mm512_cvtph_ps(half), two_pow_8);
    __m512i bits = _mm512_castps_si512(value);
    __mmask16 nan = _mm256_cmpeq_epi16_mask(magnitude, magnitude_mask);
    bits = _mm512_mask_mov_epi32(bits, nan,
                                 _mm512_or_si512(_mm512_and_si512(bits, f32_sign), quiet_nan));
    _mm512_mask_storeu_epi32(out + i, m, bits);
  }
}

MIXTRAIN_TARGET_AVX512 void f32_to_f16(const void* src, void* dst, size_t n, bool) {
  const auto* in = static_cast<const float*>(src);
  auto* out = static_cast<uint16_t*>(dst);
  const __m256i canonical_nan = _mm256_set1_epi16(0x7fff);
  for (size_t i = 0; i < n; i += 16) {
    __mmask16 m = mask16(n - i);
    __m512 x = _mm512_maskz_loadu_ps(m, in + i);
    __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    h = _mm256_mask_mov_epi16(h, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), canonical_nan);
    _mm256_mask_storeu_epi16(out + i, m, h);
  }
}

// fp32 bits -> bf16 in the high 16 bits of each lane (nearest even); NaN
// lanes are flagged in *nan.
MIXTRAIN_TARGET_AVX512 inline __m512i round_to_bf16(__m512i x, __mmask16* nan) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf_bits = _mm512_set1_epi32(0x7f800000);
  *nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, abs_mask), inf_bits);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  return _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
}

MIXTRAIN_TARGET_AVX512 void f32_to_bf16(const void* src, void* dst, size_t n, bool) {
  const auto* in = static_cast<const float*>(src);
  auto* out = static_cast<uint16_t*>(dst);
  // Word indices of the high halves of the 32 lanes of (low, high).
  const __m512i high_words =
      _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33,  //
                       31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512i canonical_nan = _mm512_set1_epi16(0x7fff);
  for (size_t i = 0; i < n; i += 32) {
    __mmask32 m = mask32(n - i);
    __m512i low = _mm512_maskz_loadu_epi32(__mmask16(m), in + i);
    __m512i high = _mm512_maskz_loadu_epi32(__mmask16(m >> 16), in + i + 16);
    __mmask16 nan_low, nan_high;
    low = round_to_bf16(low, &nan_low);
    high = round_to_bf16(high, &nan_high);
    __m512i packed = _mm512_permutex2var_epi16(low, high_words, high);
    __mmask32 nan = __mmask32(nan_low) | (__mmask32(nan_high) << 16);
    packed = _mm512_mask_mov_epi16(packed, nan, canonical_nan);
    _mm512_mask_storeu_epi16(out + i, m, packed);
  }
}

// The constants of fp8_detail::Encoding (fp8.h), as lane-wide vectors.
struct Fp8Lanes {
  int drop;                      // fp32 mantissa bits rounded away (23 - mantissa bits)
  __m512i min_normal;            // fp32 bits of the smallest normal fp8
  __m512i overflow;              // first overflowing |x| bits
  __m512i rebias;                // (127 - fp8 bias) << 23
  __m512i subnormal_shift_base;  // shift = base - fp32 exponent
  __m512i overflow_code;         // max (saturating) or NaN/inf code
  __m512i nan_code;
};

MIXTRAIN_TARGET_AVX512 void f32_to_fp8(const float* in, uint8_t* out, size_t n, const Fp8Lanes& f) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf_bits = _mm512_set1_epi32(0x7f800000);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i implicit_bit = _mm512_set1_epi32(0x800000);
  const __m512i mantissa_mask = _mm512_set1_epi32(0x7fffff);
  const __m512i normal_half_minus_one = _mm512_set1_epi32((1 << (f.drop - 1)) - 1);
  const __m128i drop = _mm_cvtsi32_si128(f.drop);
  for (size_t i = 0; i < n; i += 16) {
    __mmask16 m = mask16(n - i);
    __m512i x = _mm512_maskz_loadu_epi32(m, in + i);
    __m512i ax = _mm512_and_si512(x, abs_mask);
    __m512i sign = _mm512_and_si512(_mm512_srli_epi32(x, 24), _mm512_set1_epi32(0x80));
    // Normal range: round the dropped bits to nearest even, rebias.
    __m512i lsb = _mm512_and_si512(_mm512_srl_epi32(ax, drop), one);
    __m512i rounded = _mm512_add_epi32(ax, _mm512_add_epi32(normal_half_minus_one, lsb));
    __m512i code = _mm512_srl_epi32(_mm512_sub_epi32(rounded, f.rebias), drop);
    // Subnormal range: shift the full significand right by a per-lane
    // amount, rounding to nearest even. Shifts of 32 or more give 0.
    __m512i shift = _mm512_sub_epi32(f.subnormal_shift_base, _mm512_srli_epi32(ax, 23));
    __m512i significand = _mm512_or_si512(_mm512_and_si512(ax, mantissa_mask), implicit_bit);
    __m512i half_minus_one =
        _mm512_sub_epi32(_mm512_sllv_epi32(one, _mm512_sub_epi32(shift, one)), one);
    __m512i sub_lsb = _mm512_and_si512(_mm512_srlv_epi32(significand, shift), one);
    __m512i sub_code = _mm512_srlv_epi32(
        _mm512_add_epi32(significand, _mm512_add_epi32(half_minus_one, sub_lsb)), shift);
    code = _mm512_mask_mov_epi32(code, _mm512_cmplt_epu32_mask(ax, f.min_normal), sub_code);
    code = _mm512_mask_mov_epi32(code, _mm512_cmpge_epu32_mask(ax, f.overflow), f.overflow_code);
    code = _mm512_or_si512(code, sign);
    code = _mm512_mask_mov_epi32(code, _mm512_cmpgt_epu32_mask(ax, inf_bits), f.nan_code);
    _mm512_mask_cvtepi32_storeu_epi8(out + i, m, code);
  }
}

MIXTRAIN_TARGET_AVX512 Fp8Lanes fp8_lanes(const fp8_detail::Encoding& e, bool saturate) {
  return Fp8Lanes{static_cast<int>(23 - e.mantissa_bits),
                  _mm512_set1_epi32(static_cast<int>(e.min_normal_bits)),
                  _mm512_set1_epi32(static_cast<int>(e.overflow_bits)),
                  _mm512_set1_epi32(static_cast<int>(e.exponent_rebias)),
                  _mm512_set1_epi32(static_cast<int>(e.subnormal_shift_base)),
                  _mm512_set1_epi32(static_cast<int>(saturate ? e.max_code : e.overflow_code)),
                  _mm512_set1_epi32(static_cast<int>(e.nan_code))};
}

MIXTRAIN_TARGET_AVX512 void f32_to_e4m3(const void* src, void* dst, size_t n, bool saturate) {
  const Fp8Lanes lanes = fp8_lanes(fp8_detail::kE4M3, saturate);
  f32_to_fp8(static_cast<const float*>(src), static_cast<uint8_t*>(dst), n, lanes);
}

MIXTRAIN_TARGET_AVX512 void f32_to_e5m2(const void* src, void* dst, size_t n, bool saturate) {
  const Fp8Lanes lanes = fp8_lanes(fp8_detail::kE5M2, saturate);
  f32_to_fp8(static_cast<const float*>(src), static_cast<uint8_t*>(dst), n, lanes);
}

}  // namespace

const ConvertKernels& avx512_kernels() {
  static constexpr ConvertKernels kernels{f16_to_f32, bf16_to_f32, e4m3_to_f32, e5m2_to_f32,
                                          f32_to_f16, f32_to_bf16, f32_to_e4m3, f32_to_e5m2};
  return kernels;
}

}  // namespace mixtrain::convert_detail
