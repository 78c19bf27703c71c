// Why: the whole-model passes of a mixed-precision step: the squared
// gradient norm for clipping (sum_squares), the loss-scaler's unscale
// with inf/NaN detection (unscale_and_check), and the gradient-range
// histogram of the telemetry (magnitude_histogram). The first two walk a
// list of tensors cut into fixed chunks; chunk boundaries depend only on the tensors, and
// per-chunk results are combined in list and chunk order, so the norm has
// the same bits for any thread count and the reported tensor is the first
// in list order. unscale_and_check reads and writes each tensor once.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/cpu_fp32_view.h"
#include "engine/backend/cpu/cpu_parallel.h"
#include "engine/common/cpu_features.h"

namespace mixtrain {

using cpu_ops::Fp32View;
using cpu_ops::ThreadScratch;

namespace {

// Elements per chunk: 32 KiB of fp32, so a converted chunk stays in L1.
constexpr int64_t kChunk = 8192;

// One chunk of one tensor of the list.
struct ChunkRef {
  int tensor;
  int64_t begin;
  int64_t count;
};

// The tensors of the list (fp32/fp16/bf16) and their chunks in list order
// and element order.
struct ChunkPlan {
  std::vector<Fp32View> views;  // one per tensor
  std::vector<ChunkRef> chunks;
};

ChunkPlan plan_chunks(std::span<const Tensor> tensors) {
  ChunkPlan plan;
  for (size_t t = 0; t < tensors.size(); ++t) {
    plan.views.emplace_back(tensors[t]);
    const int64_t numel = tensors[t].numel();
    for (int64_t begin = 0; begin < numel; begin += kChunk) {
      plan.chunks.push_back({static_cast<int>(t), begin, std::min(kChunk, numel - begin)});
    }
  }
  return plan;
}

MIXTRAIN_MULTIVERSION double sum_squares_span(const float* x, int64_t n) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i];
    sum += d * d;
  }
  return sum;
}

// The smallest fp32 magnitude that becomes inf (or is NaN) once stored as T,
// rounding to nearest even: |x| < overflow_limit<T>() exactly when x stays
// finite in T.
template <class T>
float overflow_limit();
template <>
float overflow_limit<float>() {
  return std::numeric_limits<float>::infinity();
}
// 65504 (fp16 max) + 16 (half its ulp): the tie rounds to the even code, inf.
template <>
float overflow_limit<Half>() {
  return 65520.0f;
}
// bf16 max 0x7F7F + half an ulp: the tie rounds to the even code 0x7F80, inf.
template <>
float overflow_limit<BFloat16>() {
  return std::bit_cast<float>(0x7F7F8000u);
}

// x *= factor on n elements; returns whether some product has |x| >= limit
// or is NaN (so it is not finite once stored; see overflow_limit).
MIXTRAIN_MULTIVERSION bool scale_and_check_span(float* x, int64_t n, float factor, float limit) {
  int bad = 0;
#pragma omp simd reduction(| : bad)
  for (int64_t i = 0; i < n; ++i) {
    const float y = x[i] * factor;
    x[i] = y;
    bad |= !(std::fabs(y) < limit);
  }
  return bad != 0;
}

// What a chunk held after unscaling: its first non-finite element's kind.
enum class Finding : uint8_t { kFinite, kInf, kNan };

// The kind of the first element of x (n) that is not finite below `limit`.
Finding first_nonfinite(const float* x, int64_t n, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    if (!(std::fabs(x[i]) < limit)) return std::isnan(x[i]) ? Finding::kNan : Finding::kInf;
  }
  return Finding::kFinite;
}

}  // namespace

double CpuBackend::do_sum_squares(std::span<const Tensor> tensors) {
  const ChunkPlan plan = plan_chunks(tensors);
  std::vector<double> partial(plan.chunks.size());
  const ThreadScratch scratch(*this, kChunk);
  const int64_t count = static_cast<int64_t>(plan.chunks.size());
#pragma omp parallel for schedule(static) if (count > 1)
  for (int64_t c = 0; c < count; ++c) {
    const ChunkRef& chunk = plan.chunks[c];
    const float* x = plan.views[chunk.tensor].read(chunk.begin, chunk.count, scratch.mine());
    partial[c] = sum_squares_span(x, chunk.count);
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

// The check is on the values as stored in each tensor's dtype: a product
// that is finite in fp32 but overflows fp16/bf16 counts as inf. With
// inv_scale <= 1 (the loss scaler's case) no finite value can overflow, so
// exactly the tensors that held inf/NaN before are reported.
NonFiniteCheck CpuBackend::do_unscale_and_check(std::span<const Tensor> tensors, float inv_scale) {
  const ChunkPlan plan = plan_chunks(tensors);
  std::vector<float> limits;
  for (const Tensor& t : tensors) {
    limits.push_back(dispatch_float(t.dtype(), "unscale_and_check",
                                    [](auto tag) { return overflow_limit<decltype(tag)>(); }));
  }
  std::vector<Finding> findings(plan.chunks.size(), Finding::kFinite);
  const ThreadScratch scratch(*this, kChunk);
  const int64_t count = static_cast<int64_t>(plan.chunks.size());
#pragma omp parallel for schedule(static) if (count > 1)
  for (int64_t c = 0; c < count; ++c) {
    const ChunkRef& chunk = plan.chunks[c];
    const Fp32View& view = plan.views[chunk.tensor];
    const float limit = limits[chunk.tensor];
    float* x = view.update(chunk.begin, chunk.count, scratch.mine());
    if (scale_and_check_span(x, chunk.count, inv_scale, limit)) {
      findings[c] = first_nonfinite(x, chunk.count, limit);
    }
    view.commit(chunk.begin, chunk.count, x);
  }
  NonFiniteCheck result;
  for (size_t c = 0; c < findings.size(); ++c) {
    if (findings[c] != Finding::kFinite) {
      result.found = true;
      result.tensor_index = plan.chunks[c].tensor;
      result.is_nan = findings[c] == Finding::kNan;
      break;
    }
  }
  return result;
}

MagnitudeHistogram CpuBackend::do_magnitude_histogram(std::span<const Tensor> tensors) {
  MagnitudeHistogram histogram;
  for (const Tensor& t : tensors) {
    if (is_fp8(t.dtype())) {
      add_fp8_to_histogram(static_cast<const uint8_t*>(t.data()), static_cast<size_t>(t.numel()),
                           fp8_format(t.dtype()), histogram);
      continue;
    }
    dispatch_float(t.dtype(), "magnitude_histogram", [&](auto tag) {
      using T = decltype(tag);
      add_to_histogram(t.data_as<T>(), static_cast<size_t>(t.numel()), histogram);
    });
  }
  return histogram;
}

}  // namespace mixtrain
