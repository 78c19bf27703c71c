// Why: LayerNorm and RMSNorm (LayerNorm without the mean and the bias, as
// Llama normalizes), forward and backward side by side (llm.c layout), on
// rows of C channels: inp, out, dout, dinp (B,T,C) seen as (N,C); weight,
// bias and their gradients (C); mean and rstd (N) fp32, saved by the
// forward for the backward. The weight and bias gradients sum over all N rows; to be
// deterministic and race-free, rows are cut into blocks fixed by N alone,
// each block sums its rows in fp32 in order, and the block sums are then
// added in block order, so the result is the same for any thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/cpu_elementwise.h"
#include "engine/backend/cpu/cpu_fp32_view.h"
#include "engine/backend/op_checks.h"
#include "engine/backend/cpu/cpu_parallel.h"
#include "engine/common/cpu_features.h"

namespace mixtrain {

using cpu_ops::add_into;
using cpu_ops::chunk_count;
using cpu_ops::Fp32View;
using cpu_ops::parallel_chunks;
using cpu_ops::ThreadScratch;

namespace {

// The weight and bias gradients sum over rows in at most this many blocks.
constexpr int64_t kMaxRowBlocks = 128;

// Normalizes one row x (C) into out, saving its 1/rms (and, centered, its
// mean): LayerNorm subtracts the mean and adds a bias, RMSNorm neither
// (mean_out and bias are then unused).
template <bool kCentered>
MIXTRAIN_MULTIVERSION void normalize_row_forward(float* out, float* mean_out, float* rstd_out,
                                                 const float* x, const float* weight,
                                                 const float* bias, int64_t channels, float eps) {
  float mean = 0.0f;
  if constexpr (kCentered) {
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < channels; ++i) sum += x[i];
    mean = sum / static_cast<float>(channels);
  }
  float sum_sq = 0.0f;
#pragma omp simd reduction(+ : sum_sq)
  for (int64_t i = 0; i < channels; ++i) sum_sq += (x[i] - mean) * (x[i] - mean);
  const float rstd = 1.0f / std::sqrt(sum_sq / static_cast<float>(channels) + eps);
  if constexpr (kCentered) {
#pragma omp simd
    for (int64_t i = 0; i < channels; ++i) out[i] = (x[i] - mean) * rstd * weight[i] + bias[i];
    *mean_out = mean;
  } else {
#pragma omp simd
    for (int64_t i = 0; i < channels; ++i) out[i] = x[i] * rstd * weight[i];
  }
  *rstd_out = rstd;
}

// One row of the backward: dinp += dL/dx of the row, and the row's
// dL/dweight (and, centered, dL/dbias) added into the block sums.
template <bool kCentered>
MIXTRAIN_MULTIVERSION void normalize_row_backward(float* dinp, float* dweight_sum, float* dbias_sum,
                                                  const float* dout, const float* x,
                                                  const float* weight, float mean, float rstd,
                                                  int64_t channels) {
  // dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), where
  // norm = (x - mean) * rstd and dnorm = weight * dout; RMSNorm (mean 0)
  // has no mean(dnorm) term.
  float dnorm_sum = 0.0f;
  float dnorm_norm_sum = 0.0f;
#pragma omp simd reduction(+ : dnorm_sum, dnorm_norm_sum)
  for (int64_t i = 0; i < channels; ++i) {
    const float norm = (x[i] - mean) * rstd;
    const float dnorm = weight[i] * dout[i];
    dnorm_sum += dnorm;
    dnorm_norm_sum += dnorm * norm;
  }
  const float dnorm_mean = kCentered ? dnorm_sum / static_cast<float>(channels) : 0.0f;
  const float dnorm_norm_mean = dnorm_norm_sum / static_cast<float>(channels);
#pragma omp simd
  for (int64_t i = 0; i < channels; ++i) {
    const float norm = (x[i] - mean) * rstd;
    const float dnorm = weight[i] * dout[i];
    if constexpr (kCentered) dbias_sum[i] += dout[i];
    dweight_sum[i] += norm * dout[i];
    dinp[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd;
  }
}

// The forward of either norm over inp's (N,C) rows (mean and bias only
// when centered).
template <bool kCentered>
void normalize_forward(CpuBackend& backend, const Tensor& out, const Tensor* mean,
                       const Tensor& rstd, const Tensor& inp, const Tensor& weight,
                       const Tensor* bias, float eps) {
  const op_checks::RowShape shape = op_checks::row_shape(inp);
  const int64_t rows = shape.rows;
  const int64_t channels = shape.channels;

  // weight and bias as fp32, shared by all threads.
  const Tensor params = backend.empty({2, channels}, DType::kF32, MemoryCategory::kWorkspace);
  float* w = params.data_as<float>();
  float* b = w + channels;
  const float* weight32 = Fp32View(weight).read(0, channels, w);
  const float* bias32 = kCentered ? Fp32View(*bias).read(0, channels, b) : nullptr;

  const ThreadScratch scratch(backend, 2 * channels);
  const Fp32View inp_view(inp);
  const Fp32View out_view(out);
  float* mean_data = kCentered ? mean->data_as<float>() : nullptr;
  float* rstd_data = rstd.data_as<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    float* buffers = scratch.mine();
    const float* x = inp_view.read(n * channels, channels, buffers);
    float* o = out_view.overwrite(n * channels, channels, buffers + channels);
    normalize_row_forward<kCentered>(o, kCentered ? mean_data + n : nullptr, rstd_data + n, x,
                                     weight32, bias32, channels, eps);
    out_view.commit(n * channels, channels, o);
  }
}

// The backward of either norm (dbias and mean only when centered).
template <bool kCentered>
void normalize_backward(CpuBackend& backend, const Tensor& dinp, const Tensor& dweight,
                        const Tensor* dbias, const Tensor& dout, const Tensor& inp,
                        const Tensor& weight, const Tensor* mean, const Tensor& rstd) {
  const op_checks::RowShape shape = op_checks::row_shape(inp);
  const int64_t rows = shape.rows;
  const int64_t channels = shape.channels;
  // Gradient vectors summed per block: dweight, and dbias when centered.
  constexpr int64_t kSums = kCentered ? 2 : 1;

  // Block b holds rows [b * block_rows, (b + 1) * block_rows); its sums of
  // dL/dweight (and dL/dbias) go to block_sums[b].
  const int64_t block_rows = chunk_count(rows, kMaxRowBlocks);
  const int64_t blocks = block_rows == 0 ? 0 : chunk_count(rows, block_rows);
  const Tensor workspace =
      backend.empty({blocks + 1, kSums * channels}, DType::kF32, MemoryCategory::kWorkspace);
  float* weight32 = workspace.data_as<float>();  // row 0: weight as fp32
  float* block_sums = weight32 + kSums * channels;
  const float* w = Fp32View(weight).read(0, channels, weight32);

  const ThreadScratch scratch(backend, 3 * channels);
  const Fp32View dinp_view(dinp);
  const Fp32View dout_view(dout);
  const Fp32View inp_view(inp);
  const float* mean_data = kCentered ? mean->data_as<float>() : nullptr;
  const float* rstd_data = rstd.data_as<float>();
#pragma omp parallel for schedule(static)
  for (int64_t block = 0; block < blocks; ++block) {
    float* buffers = scratch.mine();
    float* dweight_sum = block_sums + block * kSums * channels;
    float* dbias_sum = kCentered ? dweight_sum + channels : nullptr;
    std::fill_n(dweight_sum, kSums * channels, 0.0f);
    const int64_t end = std::min(rows, (block + 1) * block_rows);
    for (int64_t n = block * block_rows; n < end; ++n) {
      const int64_t at = n * channels;
      const float* x = inp_view.read(at, channels, buffers);
      const float* dy = dout_view.read(at, channels, buffers + channels);
      float* dx = dinp_view.update(at, channels, buffers + 2 * channels);
      normalize_row_backward<kCentered>(dx, dweight_sum, dbias_sum, dy, x, w,
                                        kCentered ? mean_data[n] : 0.0f, rstd_data[n], channels);
      dinp_view.commit(at, channels, dx);
    }
  }

  // Each gradient += the sum of its block sums in block order; each thread
  // takes a range of channels.
  const Tensor* grads[2] = {&dweight, dbias};
  for (int64_t k = 0; k < kSums; ++k) {
    const Fp32View grad_view(*grads[k]);
    const ThreadScratch totals(backend, cpu_ops::kElementwiseChunk);
    parallel_chunks(channels, cpu_ops::kElementwiseChunk, [&](int64_t begin, int64_t n) {
      float* g = grad_view.update(begin, n, totals.mine());
      for (int64_t block = 0; block < blocks; ++block)
        add_into(g, block_sums + (block * kSums + k) * channels + begin, n);
      grad_view.commit(begin, n, g);
    });
  }
}

}  // namespace

void CpuBackend::do_layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& inp, const Tensor& weight, const Tensor& bias,
                                      float eps) {
  normalize_forward<true>(*this, out, &mean, rstd, inp, weight, &bias, eps);
}

void CpuBackend::do_layernorm_backward(const Tensor& dinp, const Tensor& dweight,
                                       const Tensor& dbias, const Tensor& dout, const Tensor& inp,
                                       const Tensor& weight, const Tensor& mean,
                                       const Tensor& rstd) {
  normalize_backward<true>(*this, dinp, dweight, &dbias, dout, inp, weight, &mean, rstd);
}

void CpuBackend::do_rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& inp,
                                    const Tensor& weight, float eps) {
  normalize_forward<false>(*this, out, nullptr, rstd, inp, weight, nullptr, eps);
}

void CpuBackend::do_rmsnorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dout,
                                     const Tensor& inp, const Tensor& weight, const Tensor& rstd) {
  normalize_backward<false>(*this, dinp, dweight, nullptr, dout, inp, weight, nullptr, rstd);
}

}  // namespace mixtrain
