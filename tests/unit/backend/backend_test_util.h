// Why: every backend test compares an op's result with a double-precision
// reference written in the test (or, in the parity test, with the CPU
// backend). They share what is here: random data, tensors made from and read
// back as doubles in any float dtype (the reference then starts from the
// values as stored, so input rounding is never counted as error), the two
// ways of comparing results, central finite differences, and the checks of
// argument errors. The tests live in namespace backend_test, so they use
// these helpers unqualified.
//
// tolerance() below is the table of the element-wise op tests (adamw, cross
// entropy, elementwise, embedding, gelu, layernorm), used with all_close.
// The GEMM, attention and parity tests measure other errors (long fp32 sums,
// chained roundings, two implementations against each other) and keep their
// own tables, with their reasons, at the top of their files.
//
// Tolerances, by the dtype of the tensor compared, relative to the values'
// scale: |got - want| <= tol * (|want| + rms(want)). The rms term keeps
// values near zero (cancellation in a sum) from demanding more than the
// tensor's typical rounding. Non-finite values must match exactly.
//
//   dtype | tol    | why
//   ------+--------+---------------------------------------------------------
//   fp32  | 1e-5   | fp32 arithmetic: sums of up to ~1e3 rounded terms and
//         |        | the 2e-7 exp/tanh approximations, far below 1e-5
//   bf16  | 2^-8   | the result is rounded once to an 8-bit significand:
//         |        | half an ulp is at most 2^-8 relative
//   fp16  | 2^-11  | rounded once to an 11-bit significand (half an ulp is
//         |        | at most 2^-11 relative); fp32 error is far smaller, and
//         |        | the rms term absorbs it for values near 0
//
// Finite differences (double forward, h = 1e-6 relative) agree with the
// analytic double backward to kFiniteDifferenceTol; an fp32 op's backward
// agrees with them to kFp32VsFiniteDifferenceTol.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "test_support/engine_error.h"

namespace mixtrain::backend_test {

using test_support::throws_invalid_argument;

// The dtypes ops compute in.
inline constexpr DType kFloatTypes[] = {DType::kF32, DType::kBF16, DType::kF16};
// Every float storage format, fp8 included (cast reads and writes them all).
inline constexpr DType kAllFloatFormats[] = {DType::kF32, DType::kBF16, DType::kF16,
                                             DType::kFP8E4M3, DType::kFP8E5M2};

inline constexpr double kFiniteDifferenceTol = 1e-6;
inline constexpr double kFp32VsFiniteDifferenceTol = 1e-4;

// The tolerance for comparing a tensor of `dtype` (see the table above).
inline double tolerance(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 1e-5;
    case DType::kBF16: return std::ldexp(1.0, -8);
    case DType::kF16: return std::ldexp(1.0, -11);
    default: break;
  }
  ADD_FAILURE() << "no tolerance for " << dtype_name(dtype);
  return 0.0;
}

// n fp32 values drawn uniformly from [lo, hi), reproducibly from `seed`,
// as doubles: an fp32 tensor holds them exactly.
inline std::vector<double> random_values(size_t n, uint32_t seed, float lo = -1.0f,
                                         float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

// A float tensor of `dtype` holding `values`, each rounded to fp32 and
// then to dtype with the engine's scalar conversions (float16.h).
inline Tensor make_tensor(Backend& backend, const Shape& shape, DType dtype,
                          const std::vector<double>& values,
                          MemoryCategory category = MemoryCategory::kActivations) {
  Tensor t = backend.empty(shape, dtype, category);
  EXPECT_EQ(t.numel(), static_cast<int64_t>(values.size())) << t.describe();
  dispatch_float(dtype, "make_tensor", [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> stored;
    for (double v : values) stored.push_back(from_float<T>(static_cast<float>(v)));
    backend.copy_from_host(t, stored.data());
  });
  return t;
}

// The values a float tensor holds, exactly, as doubles.
inline std::vector<double> values_of(Backend& backend, const Tensor& t) {
  return dispatch_float(t.dtype(), "values_of", [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> stored(static_cast<size_t>(t.numel()));
    backend.copy_to_host(stored.data(), t);
    std::vector<double> v;
    for (T x : stored) v.push_back(to_float(x));
    return v;
  });
}

// An int32 tensor of the given ids.
inline Tensor make_ids(Backend& backend, const std::vector<int32_t>& ids) {
  Tensor t =
      backend.empty({static_cast<int64_t>(ids.size())}, DType::kI32, MemoryCategory::kActivations);
  backend.copy_from_host(t, ids.data());
  return t;
}

// Root mean square of the finite values of v (0 when there are none).
inline double rms(const std::vector<double>& v) {
  double s = 0.0;
  size_t n = 0;
  for (double x : v) {
    if (!std::isfinite(x)) continue;
    s += x * x;
    ++n;
  }
  return n == 0 ? 0.0 : std::sqrt(s / static_cast<double>(n));
}

// got matches want elementwise within tol * (|want| + rms(want)); NaN
// matches only NaN and an infinity only itself. The failure names the
// first mismatch and the count.
inline ::testing::AssertionResult all_close(const std::vector<double>& got,
                                            const std::vector<double>& want, double tol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != expected " << want.size();
  }
  const double scale = rms(want);
  size_t bad = 0;
  size_t first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool ok = std::isnan(want[i]) ? std::isnan(got[i])
                    : std::isinf(want[i])
                        ? got[i] == want[i]
                        : std::fabs(got[i] - want[i]) <= tol * (std::fabs(want[i]) + scale);
    if (!ok && bad++ == 0) first = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " elements differ; first at " << first << ": got "
         << got[first] << ", expected " << want[first] << " (tol " << tol << ", scale " << scale
         << ")";
}

// Largest |x| (at least 1e-30 so it can divide).
inline double max_abs(const std::vector<double>& values) {
  double m = 1e-30;
  for (double v : values) m = std::max(m, std::abs(v));
  return m;
}

// The largest |got - want| is at most `allowed`; a non-finite got counts as
// infinitely far off. The failure names the worst element.
inline ::testing::AssertionResult max_error_within(const std::vector<double>& got,
                                                   const std::vector<double>& want,
                                                   double allowed) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != expected " << want.size();
  }
  double worst = 0.0;
  size_t worst_index = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double error = std::isfinite(got[i]) ? std::abs(got[i] - want[i])
                                               : std::numeric_limits<double>::infinity();
    if (error > worst) {
      worst = error;
      worst_index = i;
    }
  }
  if (worst <= allowed) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "element " << worst_index << ": got " << got[worst_index] << ", expected "
         << want[worst_index] << " (error " << worst << " > allowed " << allowed << ")";
}

// Central finite differences of the scalar function f at x:
// (f(x + h_i e_i) - f(x - h_i e_i)) / (2 h_i) with h_i = h * max(1, |x_i|).
inline std::vector<double> finite_differences(
    const std::function<double(const std::vector<double>&)>& f, std::vector<double> x,
    double h = 1e-6) {
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double xi = x[i];
    const double step = h * std::max(1.0, std::fabs(xi));
    x[i] = xi + step;
    const double up = f(x);
    x[i] = xi - step;
    const double down = f(x);
    x[i] = xi;
    grad[i] = (up - down) / (2.0 * step);
  }
  return grad;
}

// sum_i a[i] * b[i]: the scalar loss whose gradient with respect to an
// op's output is b, used to turn a forward into an FD-checkable function.
inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Runs f with OpenMP teams of `threads` threads, then restores the setting.
template <class F>
void with_threads(int threads, F&& f) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  f();
  omp_set_num_threads(saved);
}

}  // namespace mixtrain::backend_test
