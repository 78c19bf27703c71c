// Why: the GELU of the MLP, forward and backward side by side, in GPT-2's
// tanh form, elementwise over (B,T,4C) flattened. 0.5 (1 + tanh u) is
// evaluated as the equal logistic 1 / (1 + e^(-2u)): no cancellation where
// tanh u -> -1 (so small negative outputs keep full relative precision), and
// with the vectorizable exp of cpu_math.h the loops run at SIMD width.
#include <cstdint>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/cpu_elementwise.h"
#include "engine/backend/cpu/cpu_math.h"
#include "engine/common/cpu_features.h"

namespace mixtrain {

using cpu_ops::exp_approx;
using cpu_ops::map_elementwise;
using cpu_ops::OutputMode;

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubicCoeff = 0.044715f;

// s = 0.5 (1 + tanh u) = 1 / (1 + e^(-2u)) for u = sqrt(2/pi) (x + 0.044715 x^3).
inline float gelu_gate(float x) {
  const float u = kSqrt2OverPi * (x + kCubicCoeff * x * x * x);
  return 1.0f / (1.0f + exp_approx(-2.0f * u));
}

// out = x s.
MIXTRAIN_MULTIVERSION void gelu_forward_span(float* out, const float* inp, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = inp[i] * gelu_gate(inp[i]);
}

// dinp += dout * GELU'(x), where with t = tanh u, 0.5 (1 - t^2) = 2 s (1 - s):
// GELU'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx = s + 2 x s (1 - s) du/dx,
// du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
MIXTRAIN_MULTIVERSION void gelu_backward_span(float* dinp, const float* dout, const float* inp,
                                              int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float s = gelu_gate(x);
    const float du_dx = kSqrt2OverPi * (1.0f + 3.0f * kCubicCoeff * x * x);
    dinp[i] += dout[i] * (s + 2.0f * x * s * (1.0f - s) * du_dx);
  }
}

}  // namespace

void CpuBackend::do_gelu_forward(const Tensor& out, const Tensor& inp) {
  map_elementwise(*this, out, OutputMode::kOverwrite, gelu_forward_span, inp);
}

void CpuBackend::do_gelu_backward(const Tensor& dinp, const Tensor& dout, const Tensor& inp) {
  map_elementwise(*this, dinp, OutputMode::kAccumulate, gelu_backward_span, dout, inp);
}

}  // namespace mixtrain
