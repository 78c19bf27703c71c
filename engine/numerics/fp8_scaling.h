// Why: per-tensor scaling for fp8 (Transformer Engine's delayed and current
// recipes): values are multiplied by scale before the cast so that the
// tensor's amax lands just under the format's max, and by 1/scale after.
// The quantizing loop also measures what the recipes and the telemetry
// need: the tensor's amax and how many values the scale pushed past max.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/numerics/fp8.h"

namespace mixtrain {

// Largest |x| over n elements (T float, Half or BFloat16) as fp32; NaNs
// are ignored, inf counts as inf; 0 when n is 0 or every element is NaN.
// Multi-threaded (OpenMP) for large n.
template <class T>
float amax(const T* x, size_t n);

// scale = FP8_MAX / amax / 2^margin (the magnitude of amax_value is used).
// Returns 1 when amax is 0, inf or NaN (no information to scale by), and
// FLT_MAX when the quotient overflows (amax tiny), never inf.
float fp8_scale(float amax_value, Fp8Format format, int margin = 0);

// What quantizing one tensor saw.
struct Fp8QuantizeStats {
  float amax = 0.0f;      // largest |x| of the input (NaN ignored, as amax())
  int64_t saturated = 0;  // elements with |x * scale| > the format's max (inf too)
};

// dst[i] = float_to_fp8(float(src[i]) * scale, format), saturating, the
// product rounded to fp32 once (as a cast kernel does); T is float, Half
// or BFloat16. Multi-threaded (OpenMP) for large n.
template <class T>
Fp8QuantizeStats quantize_fp8(const T* src, size_t n, float scale, Fp8Format format, uint8_t* dst);

}  // namespace mixtrain
