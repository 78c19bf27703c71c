// Why: per-tensor scaling for fp8 (Transformer Engine's delayed-scaling
// recipe): values are multiplied by scale before the cast so that the
// tensor's amax lands just under the format's max, and by 1/scale after.
#pragma once

#include <cstddef>

#include "engine/numerics/fp8.h"

namespace mixtrain {

// Largest |x| over n floats; NaNs are ignored, inf counts as inf; 0 when
// n is 0 or every element is NaN. Multi-threaded (OpenMP) for large n.
float amax(const float* x, size_t n);

// scale = FP8_MAX / amax / 2^margin (the magnitude of amax_value is used).
// Returns 1 when amax is 0, inf or NaN (no information to scale by), and
// FLT_MAX when the quotient overflows (amax tiny), never inf.
float fp8_scale(float amax_value, Fp8Format format, int margin = 0);

}  // namespace mixtrain
