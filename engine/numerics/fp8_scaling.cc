// Why: the per-tensor statistics and the scaled cast of fp8 (see
// fp8_scaling.h).
#include "engine/numerics/fp8_scaling.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "engine/common/cpu_features.h"
#include "engine/numerics/float16.h"

namespace mixtrain {
namespace {

// Above this many elements amax splits the work across OpenMP threads.
constexpr size_t kParallelThreshold = size_t{1} << 18;
constexpr size_t kThreadChunk = size_t{1} << 16;

// |x|'s bits with NaNs masked to 0: for non-NaN floats the bits order like
// |x|, and an integer max reduction vectorizes (a float one the compiler
// may not reorder would not). The AND stands for a select GCC 12 does not
// vectorize inside a reduction.
inline uint32_t magnitude_bits_without_nan(float x) {
  uint32_t magnitude = std::bit_cast<uint32_t>(x) & 0x7fffffffu;
  return magnitude & (0u - static_cast<uint32_t>(magnitude <= 0x7f800000u));
}

template <class T>
MIXTRAIN_MULTIVERSION float amax_range(const T* x, size_t n) {
  uint32_t result = 0;
  for (size_t i = 0; i < n; ++i) {
    result = std::max(result, magnitude_bits_without_nan(to_float(x[i])));
  }
  return std::bit_cast<float>(result);
}

// One chunk of quantize_fp8: the cast, the amax bits and the count of
// scaled magnitudes above max_bits (which catches +-inf, not NaN).
template <class T>
MIXTRAIN_MULTIVERSION void quantize_range(const T* src, size_t n, float scale,
                                          const fp8_detail::Encoding& encoding, uint32_t max_bits,
                                          uint8_t* dst, uint32_t* amax_bits, int64_t* saturated) {
  uint32_t result = 0;
  int64_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    float x = to_float(src[i]);
    float scaled = x * scale;
    result = std::max(result, magnitude_bits_without_nan(x));
    uint32_t scaled_magnitude = std::bit_cast<uint32_t>(scaled) & 0x7fffffffu;
    count += (scaled_magnitude > max_bits) & (scaled_magnitude <= 0x7f800000u);
    dst[i] = fp8_detail::encode(scaled, encoding, /*saturate=*/true);
  }
  *amax_bits = result;
  *saturated = count;
}

}  // namespace

template <class T>
float amax(const T* x, size_t n) {
  if (n < kParallelThreshold) return amax_range(x, n);
  size_t chunks = (n + kThreadChunk - 1) / kThreadChunk;
  float result = 0.0f;
#pragma omp parallel for reduction(max : result) schedule(static)
  for (size_t c = 0; c < chunks; ++c) {
    size_t begin = c * kThreadChunk;
    result = std::max(result, amax_range(x + begin, std::min(kThreadChunk, n - begin)));
  }
  return result;
}

float fp8_scale(float amax_value, Fp8Format format, int margin) {
  float magnitude = std::fabs(amax_value);
  if (magnitude == 0.0f || !std::isfinite(magnitude)) return 1.0f;
  float scale = std::ldexp(fp8_max(format) / magnitude, -margin);
  return std::isinf(scale) ? FLT_MAX : scale;
}

template <class T>
Fp8QuantizeStats quantize_fp8(const T* src, size_t n, float scale, Fp8Format format, uint8_t* dst) {
  const fp8_detail::Encoding& encoding =
      format == Fp8Format::kE4M3 ? fp8_detail::kE4M3 : fp8_detail::kE5M2;
  const uint32_t max_bits = std::bit_cast<uint32_t>(fp8_max(format));
  size_t chunks = (n + kThreadChunk - 1) / kThreadChunk;
  uint32_t amax_bits = 0;
  int64_t saturated = 0;
#pragma omp parallel for reduction(max : amax_bits) reduction(+ : saturated) \
    schedule(static) if (n >= kParallelThreshold)
  for (size_t c = 0; c < chunks; ++c) {
    size_t begin = c * kThreadChunk;
    uint32_t chunk_amax = 0;
    int64_t chunk_saturated = 0;
    quantize_range(src + begin, std::min(kThreadChunk, n - begin), scale, encoding, max_bits,
                   dst + begin, &chunk_amax, &chunk_saturated);
    amax_bits = std::max(amax_bits, chunk_amax);
    saturated += chunk_saturated;
  }
  return {std::bit_cast<float>(amax_bits), saturated};
}

template float amax(const float*, size_t);
template float amax(const Half*, size_t);
template float amax(const BFloat16*, size_t);
template Fp8QuantizeStats quantize_fp8(const float*, size_t, float, Fp8Format, uint8_t*);
template Fp8QuantizeStats quantize_fp8(const Half*, size_t, float, Fp8Format, uint8_t*);
template Fp8QuantizeStats quantize_fp8(const BFloat16*, size_t, float, Fp8Format, uint8_t*);

}  // namespace mixtrain
