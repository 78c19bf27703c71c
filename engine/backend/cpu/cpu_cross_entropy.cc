// Why: the loss head, fused as in llm.c: one pass over each row of logits
// (N,V) gives the softmax, the loss -log p[target] and, when asked, the
// logits' gradient dloss * (p - onehot(target)), written over the logits
// when they alias so that no (N,V) probability tensor is ever stored.
// Softmax is in fp32 with the row max subtracted, exp vectorized
// (cpu_math.h); rows are spread over threads. Columns past `classes` (a
// padded vocabulary) are left out and get a zero gradient.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/cpu_fp32_view.h"
#include "engine/backend/cpu/cpu_math.h"
#include "engine/backend/op_checks.h"
#include "engine/backend/cpu/cpu_parallel.h"
#include "engine/common/cpu_features.h"

namespace mixtrain {

using cpu_ops::exp_approx;
using cpu_ops::Fp32View;
using cpu_ops::ThreadScratch;

namespace {

// x's bits as an int32 whose integer order is the float order (negative
// floats have their magnitude bits flipped); the map is its own inverse.
inline int32_t ordered_key(int32_t bits) { return bits ^ ((bits >> 31) & 0x7FFFFFFF); }

// max(x), as an integer max over ordered keys: a float max reduction only
// vectorizes with -ffinite-math-only, which would lose NaN. A NaN with the
// sign bit clear wins the max; any NaN makes the row's loss NaN either way.
MIXTRAIN_MULTIVERSION float row_max(const float* x, int64_t n) {
  int32_t max_key = std::numeric_limits<int32_t>::min();
#pragma omp simd reduction(max : max_key)
  for (int64_t i = 0; i < n; ++i) {
    max_key = std::max(max_key, ordered_key(std::bit_cast<int32_t>(x[i])));
  }
  return std::bit_cast<float>(ordered_key(max_key));
}

// e[i] = exp(x[i] - max); returns the sum of e. e may equal x.
MIXTRAIN_MULTIVERSION float exp_shifted_and_sum(float* e, const float* x, float max, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    const float y = exp_approx(x[i] - max);
    e[i] = y;
    sum += y;
  }
  return sum;
}

MIXTRAIN_MULTIVERSION void scale_span(float* x, float factor, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

}  // namespace

void CpuBackend::do_softmax_cross_entropy(const Tensor& losses, const Tensor* dlogits,
                                          const Tensor& logits, const Tensor& targets, float dloss,
                                          int64_t classes) {
  constexpr const char* kOp = "softmax_cross_entropy";
  const int64_t vocab = logits.dim(-1);
  const int64_t rows = logits.numel() / vocab;
  const int64_t used = op_checks::checked_classes(kOp, classes, vocab);

  const ThreadScratch scratch(*this, 2 * vocab);
  const Fp32View logits_view(logits);
  std::optional<Fp32View> dlogits_view;
  if (dlogits != nullptr) dlogits_view.emplace(*dlogits);
  const int32_t* target = targets.data_as<int32_t>();
  float* loss = losses.data_as<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    float* buffers = scratch.mine();
    const int64_t at = n * vocab;
    const float* x = logits_view.read(at, vocab, buffers);
    const float target_logit = x[target[n]];
    const float max = row_max(x, used);
    // The softmax numerators go where the gradient will be written (which
    // may be x itself: x is not read again), or to scratch.
    float* e = dlogits_view ? dlogits_view->overwrite(at, vocab, buffers + vocab) : buffers + vocab;
    const float sum = exp_shifted_and_sum(e, x, max, used);
    loss[n] = std::log(sum) - (target_logit - max);
    if (dlogits_view) {
      scale_span(e, dloss / sum, used);  // dloss * softmax
      e[target[n]] -= dloss;
      std::fill(e + used, e + vocab, 0.0f);  // the padding takes no part
      dlogits_view->commit(at, vocab, e);
    }
  }
}

}  // namespace mixtrain
