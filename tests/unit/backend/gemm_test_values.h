// Why: the GEMM and attention tests compare backend results with double
// references built from the values the tensors really hold (after rounding
// to their dtype), so they need the same few helpers to fill tensors from
// host values and read them back as doubles.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/backend.h"

namespace mixtrain::test_values {

// `n` values uniform in [lo, hi), reproducible from `seed`.
inline std::vector<float> random_values(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

// A device tensor of `dtype` holding `values` (rounded to nearest even).
inline Tensor make_tensor(Backend& backend, const Shape& shape, DType dtype,
                          const std::vector<float>& values,
                          MemoryCategory category = MemoryCategory::kActivations) {
  Tensor t = backend.empty(shape, dtype, category);
  dispatch_float(dtype, "make_tensor", [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> stored(values.size());
    for (size_t i = 0; i < values.size(); ++i) stored[i] = from_float<T>(values[i]);
    backend.copy_from_host(t, stored.data());
  });
  return t;
}

// The elements of `t` as doubles (exact).
inline std::vector<double> read_values(Backend& backend, const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  dispatch_float(t.dtype(), "read_values", [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> stored(out.size());
    backend.copy_to_host(stored.data(), t);
    for (size_t i = 0; i < out.size(); ++i) out[i] = to_float(stored[i]);
  });
  return out;
}

// Largest |x| (at least 1e-30 so it can divide).
inline double max_abs(const std::vector<double>& values) {
  double m = 1e-30;
  for (double v : values) m = std::max(m, std::abs(v));
  return m;
}

}  // namespace mixtrain::test_values
