// Why: LayerNorm forward and backward side by side (llm.c layout), on rows
// of C channels: inp, out, dout, dinp (B,T,C) seen as (N,C); weight, bias
// and their gradients (C); mean and rstd (N) fp32, saved by the forward for
// the backward. The weight and bias gradients sum over all N rows; to be
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

// Normalizes one row x (C) into out, saving its mean and 1/stddev.
MIXTRAIN_MULTIVERSION void layernorm_row_forward(float* out, float* mean_out, float* rstd_out,
                                                 const float* x, const float* weight,
                                                 const float* bias, int64_t channels, float eps) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < channels; ++i) sum += x[i];
  const float mean = sum / static_cast<float>(channels);
  float sum_sq = 0.0f;
#pragma omp simd reduction(+ : sum_sq)
  for (int64_t i = 0; i < channels; ++i) sum_sq += (x[i] - mean) * (x[i] - mean);
  const float rstd = 1.0f / std::sqrt(sum_sq / static_cast<float>(channels) + eps);
#pragma omp simd
  for (int64_t i = 0; i < channels; ++i) out[i] = (x[i] - mean) * rstd * weight[i] + bias[i];
  *mean_out = mean;
  *rstd_out = rstd;
}

// One row of the backward: dinp += dL/dx of the row, and the row's
// dL/dweight and dL/dbias added into the block sums dweight_sum, dbias_sum.
MIXTRAIN_MULTIVERSION void layernorm_row_backward(float* dinp, float* dweight_sum, float* dbias_sum,
                                                  const float* dout, const float* x,
                                                  const float* weight, float mean, float rstd,
                                                  int64_t channels) {
  // dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), where
  // norm = (x - mean) * rstd and dnorm = weight * dout.
  float dnorm_sum = 0.0f;
  float dnorm_norm_sum = 0.0f;
#pragma omp simd reduction(+ : dnorm_sum, dnorm_norm_sum)
  for (int64_t i = 0; i < channels; ++i) {
    const float norm = (x[i] - mean) * rstd;
    const float dnorm = weight[i] * dout[i];
    dnorm_sum += dnorm;
    dnorm_norm_sum += dnorm * norm;
  }
  const float dnorm_mean = dnorm_sum / static_cast<float>(channels);
  const float dnorm_norm_mean = dnorm_norm_sum / static_cast<float>(channels);
#pragma omp simd
  for (int64_t i = 0; i < channels; ++i) {
    const float norm = (x[i] - mean) * rstd;
    const float dnorm = weight[i] * dout[i];
    dbias_sum[i] += dout[i];
    dweight_sum[i] += norm * dout[i];
    dinp[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd;
  }
}

}  // namespace

void CpuBackend::do_layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& inp, const Tensor& weight, const Tensor& bias,
                                      float eps) {
  const op_checks::RowShape shape = op_checks::row_shape(inp);
  const int64_t rows = shape.rows;
  const int64_t channels = shape.channels;

  // weight and bias as fp32, shared by all threads.
  const Tensor params = empty({2, channels}, DType::kF32, MemoryCategory::kWorkspace);
  float* w = params.data_as<float>();
  float* b = w + channels;
  const float* weight32 = Fp32View(weight).read(0, channels, w);
  const float* bias32 = Fp32View(bias).read(0, channels, b);

  const ThreadScratch scratch(*this, 2 * channels);
  const Fp32View inp_view(inp);
  const Fp32View out_view(out);
  float* mean_data = mean.data_as<float>();
  float* rstd_data = rstd.data_as<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    float* buffers = scratch.mine();
    const float* x = inp_view.read(n * channels, channels, buffers);
    float* o = out_view.overwrite(n * channels, channels, buffers + channels);
    layernorm_row_forward(o, mean_data + n, rstd_data + n, x, weight32, bias32, channels, eps);
    out_view.commit(n * channels, channels, o);
  }
}

void CpuBackend::do_layernorm_backward(const Tensor& dinp, const Tensor& dweight,
                                       const Tensor& dbias, const Tensor& dout, const Tensor& inp,
                                       const Tensor& weight, const Tensor& mean,
                                       const Tensor& rstd) {
  const op_checks::RowShape shape = op_checks::row_shape(inp);
  const int64_t rows = shape.rows;
  const int64_t channels = shape.channels;

  // Block b holds rows [b * block_rows, (b + 1) * block_rows); its sums of
  // dL/dweight and dL/dbias go to block_sums[b] = (dweight (C), dbias (C)).
  const int64_t block_rows = chunk_count(rows, kMaxRowBlocks);
  const int64_t blocks = block_rows == 0 ? 0 : chunk_count(rows, block_rows);
  const Tensor workspace =
      empty({blocks + 1, 2 * channels}, DType::kF32, MemoryCategory::kWorkspace);
  float* weight32 = workspace.data_as<float>();  // row 0: weight as fp32
  float* block_sums = weight32 + 2 * channels;
  const float* w = Fp32View(weight).read(0, channels, weight32);

  const ThreadScratch scratch(*this, 3 * channels);
  const Fp32View dinp_view(dinp);
  const Fp32View dout_view(dout);
  const Fp32View inp_view(inp);
  const float* mean_data = mean.data_as<float>();
  const float* rstd_data = rstd.data_as<float>();
#pragma omp parallel for schedule(static)
  for (int64_t block = 0; block < blocks; ++block) {
    float* buffers = scratch.mine();
    float* dweight_sum = block_sums + block * 2 * channels;
    float* dbias_sum = dweight_sum + channels;
    std::fill_n(dweight_sum, 2 * channels, 0.0f);
    const int64_t end = std::min(rows, (block + 1) * block_rows);
    for (int64_t n = block * block_rows; n < end; ++n) {
      const int64_t at = n * channels;
      const float* x = inp_view.read(at, channels, buffers);
      const float* dy = dout_view.read(at, channels, buffers + channels);
      float* dx = dinp_view.update(at, channels, buffers + 2 * channels);
      layernorm_row_backward(dx, dweight_sum, dbias_sum, dy, x, w, mean_data[n], rstd_data[n],
                             channels);
      dinp_view.commit(at, channels, dx);
    }
  }

  // dweight += sum of block sums in block order (likewise dbias); each
  // thread takes a range of channels.
  const Fp32View dweight_view(dweight);
  const Fp32View dbias_view(dbias);
  const ThreadScratch totals(*this, 2 * cpu_ops::kElementwiseChunk);
  parallel_chunks(channels, cpu_ops::kElementwiseChunk, [&](int64_t begin, int64_t n) {
    float* buffers = totals.mine();
    float* dw = dweight_view.update(begin, n, buffers);
    float* db = dbias_view.update(begin, n, buffers + cpu_ops::kElementwiseChunk);
    for (int64_t block = 0; block < blocks; ++block) {
      add_into(dw, block_sums + block * 2 * channels + begin, n);
      add_into(db, block_sums + block * 2 * channels + channels + begin, n);
    }
    dweight_view.commit(begin, n, dw);
    dbias_view.commit(begin, n, db);
  });
}

}  // namespace mixtrain
