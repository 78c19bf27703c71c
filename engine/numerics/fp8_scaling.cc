// Why: the per-tensor statistics of fp8 delayed scaling (see fp8_scaling.h).
#include "engine/numerics/fp8_scaling.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "engine/common/cpu_features.h"

namespace mixtrain {
namespace {

// Above this many elements amax splits the work across OpenMP threads.
constexpr size_t kParallelThreshold = size_t{1} << 18;
constexpr size_t kThreadChunk = size_t{1} << 16;

// One thread's amax, on bit patterns: for non-NaN floats, |x|'s bits order
// like |x|, and an integer max reduction vectorizes (a float one the
// compiler may not reorder would not). NaNs are masked to 0 with an AND, as
// GCC 12 does not vectorize the equivalent select inside a reduction.
MIXTRAIN_MULTIVERSION float amax_range(const float* x, size_t n) {
  uint32_t result = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t magnitude = std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu;
    magnitude &= 0u - static_cast<uint32_t>(magnitude <= 0x7f800000u);
    result = std::max(result, magnitude);
  }
  return std::bit_cast<float>(result);
}

}  // namespace

float amax(const float* x, size_t n) {
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
  float format_max = format == Fp8Format::kE4M3 ? kFp8E4M3Max : kFp8E5M2Max;
  float scale = std::ldexp(format_max / magnitude, -margin);
  return std::isinf(scale) ? FLT_MAX : scale;
}

}  // namespace mixtrain
