// Why: LayerNorm and RMSNorm (LayerNorm without the mean and the bias, as
// Llama normalizes) on the GPU, forward and backward side by side (llm.c's
// layernorm_forward/backward). One warp normalizes one row (N,C) in fp32.
// The weight and bias gradients sum over all N rows; to stay deterministic
// they are summed per fixed chunk of rows into a workspace and the chunks
// are then added in order (no float atomics).
#include <cuda_runtime.h>

#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/cuda_dtype.cuh"
#include "engine/backend/cuda/cuda_error.h"
#include "engine/backend/cuda/cuda_kernel_utils.cuh"
#include "engine/backend/cuda/cuda_op_checks.h"
#include "engine/backend/op_checks.h"

namespace mixtrain {
namespace {

using gpu::kWarpSize;
using gpu::warp_sum;

constexpr int kRowsPerBlock = gpu::kBlockThreads / kWarpSize;
// Rows per chunk of the weight/bias gradient sums, and the most chunks.
constexpr int64_t kRowsPerChunk = 64;
constexpr int64_t kMaxChunks = 256;

// Index of this thread's row when each warp owns one row, or -1 past the end.
__device__ inline int64_t warp_row(int64_t rows) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  return row < rows ? row : -1;
}

// out = (inp - mean) * rstd * weight + bias per row, saving mean and rstd;
// not centered (RMSNorm): out = inp * rstd * weight, saving rstd (mean and
// bias are not read).
template <bool kCentered, class Ref>
__global__ void normalize_forward_kernel(Ref out, float* mean, float* rstd, Ref inp, Ref weight,
                                         Ref bias, float eps, int64_t rows, int64_t channels) {
  const int64_t row = warp_row(rows);
  if (row < 0) return;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t base = row * channels;
  float m = 0.0f;
  if constexpr (kCentered) {
    float sum = 0.0f;
    for (int64_t c = lane; c < channels; c += kWarpSize) sum += inp.load(base + c);
    m = warp_sum(sum) / static_cast<float>(channels);
  }
  float squares = 0.0f;
  for (int64_t c = lane; c < channels; c += kWarpSize) {
    const float d = inp.load(base + c) - m;
    squares += d * d;
  }
  const float variance = warp_sum(squares) / static_cast<float>(channels);
  const float s = 1.0f / sqrtf(variance + eps);
  for (int64_t c = lane; c < channels; c += kWarpSize) {
    const float normalized = (inp.load(base + c) - m) * s;
    if constexpr (kCentered) {
      out.store(base + c, normalized * weight.load(c) + bias.load(c));
    } else {
      out.store(base + c, normalized * weight.load(c));
    }
  }
  if (lane == 0) {
    if constexpr (kCentered) mean[row] = m;
    rstd[row] = s;
  }
}

// dinp += (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd per row,
// with norm = (inp - mean) * rstd and dnorm = dout * weight; not centered,
// mean is 0 and there is no mean(dnorm) term.
template <bool kCentered, class Ref>
__global__ void normalize_backward_input_kernel(Ref dinp, Ref dout, Ref inp, Ref weight,
                                                const float* mean, const float* rstd, int64_t rows,
                                                int64_t channels) {
  const int64_t row = warp_row(rows);
  if (row < 0) return;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t base = row * channels;
  const float m = kCentered ? mean[row] : 0.0f, s = rstd[row];
  float dnorm_sum = 0.0f, dnorm_norm_sum = 0.0f;
  for (int64_t c = lane; c < channels; c += kWarpSize) {
    const float norm = (inp.load(base + c) - m) * s;
    const float dnorm = dout.load(base + c) * weight.load(c);
    dnorm_sum += dnorm;
    dnorm_norm_sum += dnorm * norm;
  }
  const float dnorm_mean = warp_sum(dnorm_sum) / static_cast<float>(channels);
  const float dnorm_norm_mean = warp_sum(dnorm_norm_sum) / static_cast<float>(channels);
  for (int64_t c = lane; c < channels; c += kWarpSize) {
    const float norm = (inp.load(base + c) - m) * s;
    const float dnorm = dout.load(base + c) * weight.load(c);
    const float grad = (dnorm - (kCentered ? dnorm_mean : 0.0f) - norm * dnorm_norm_mean) * s;
    dinp.store(base + c, dinp.load(base + c) + grad);
  }
}

// For each column and chunk of rows: partial_dweight = sum dout * norm and,
// centered, partial_dbias = sum dout over the chunk's rows, in row order.
template <bool kCentered, class Ref>
__global__ void normalize_backward_params_partial_kernel(float* partial_dweight,
                                                         float* partial_dbias, Ref dout, Ref inp,
                                                         const float* mean, const float* rstd,
                                                         int64_t rows, int64_t channels,
                                                         int64_t rows_per_chunk) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const int64_t begin = blockIdx.y * rows_per_chunk;
  const int64_t end = min(rows, begin + rows_per_chunk);
  float dweight = 0.0f, dbias = 0.0f;
  for (int64_t r = begin; r < end; ++r) {
    const float d = dout.load(r * channels + c);
    dweight += d * (inp.load(r * channels + c) - (kCentered ? mean[r] : 0.0f)) * rstd[r];
    dbias += d;
  }
  partial_dweight[blockIdx.y * channels + c] = dweight;
  if constexpr (kCentered) partial_dbias[blockIdx.y * channels + c] = dbias;
}

// grad += the chunks' partial sums, added in chunk order.
template <class Ref>
__global__ void normalize_backward_params_finish_kernel(Ref grad, const float* partial,
                                                        int64_t chunks, int64_t channels) {
  for (int64_t c = gpu::thread_index(); c < channels; c += gpu::grid_size()) {
    float sum = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) sum += partial[k * channels + c];
    grad.store(c, grad.load(c) + sum);
  }
}

// The forward of either norm (mean and bias only when centered).
template <bool kCentered>
void normalize_forward(cudaStream_t stream, const char* op, const Tensor& out, const Tensor* mean,
                       const Tensor& rstd, const Tensor& inp, const Tensor& weight,
                       const Tensor* bias, float eps) {
  const op_checks::RowShape shape = op_checks::row_shape(inp);
  const int64_t rows = shape.rows;
  const int64_t channels = shape.channels;
  gpu::dispatch_compute({&out, &inp, &weight, bias}, op, [&](auto policy) {
    using P = decltype(policy);
    if (rows == 0) return;
    const unsigned blocks = static_cast<unsigned>(
        gpu::checked_int(op, "row blocks", (rows + kRowsPerBlock - 1) / kRowsPerBlock));
    // Not centered, the kernel reads no bias: weight stands in for it.
    normalize_forward_kernel<kCentered><<<blocks, gpu::kBlockThreads, 0, stream>>>(
        P::ref(out), kCentered ? mean->data_as<float>() : nullptr, rstd.data_as<float>(),
        P::ref(inp), P::ref(weight), P::ref(kCentered ? *bias : weight), eps, rows, channels);
    MIXTRAIN_CUDA_CHECK_LAUNCH("normalize_forward_kernel");
  });
}

}  // namespace

void CudaBackend::do_layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                       const Tensor& inp, const Tensor& weight, const Tensor& bias,
                                       float eps) {
  normalize_forward<true>(begin_op(), "layernorm_forward", out, &mean, rstd, inp, weight, &bias,
                          eps);
}

void CudaBackend::do_rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& inp,
                                     const Tensor& weight, float eps) {
  normalize_forward<false>(begin_op(), "rmsnorm_forward", out, nullptr, rstd, inp, weight, nullptr,
                           eps);
}

namespace {

// The backward of either norm (dbias and mean only when centered).
template <bool kCentered>
void normalize_backward(CudaBackend& backend, const char* op, const Tensor& dinp,
                        const Tensor& dweight, const Tensor* dbias, const Tensor& dout,
                        const Tensor& inp, const Tensor& weight, const Tensor* mean,
                        const Tensor& rstd) {
  const cudaStream_t stream = backend.begin_op();
  const op_checks::RowShape shape = op_checks::row_shape(inp);
  const int64_t rows = shape.rows;
  const int64_t channels = shape.channels;
  if (rows == 0) return;
  const int64_t chunks = std::min(kMaxChunks, (rows + kRowsPerChunk - 1) / kRowsPerChunk);
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  const std::vector<Tensor> partial = backend.scratch(
      {{{chunks, channels}, DType::kF32}, {{kCentered ? chunks : 0, channels}, DType::kF32}});
  const float* mean_data = kCentered ? mean->data_as<float>() : nullptr;
  gpu::dispatch_compute({&dinp, &dweight, dbias, &dout, &inp, &weight}, op, [&](auto policy) {
    using P = decltype(policy);
    // The parameter sums run first: they read dout, which dinp may alias.
    const dim3 grid(static_cast<unsigned>(gpu::checked_int(
                        op, "column blocks",
                        (channels + gpu::kBlockThreads - 1) / gpu::kBlockThreads)),
                    static_cast<unsigned>(chunks));
    normalize_backward_params_partial_kernel<kCentered><<<grid, gpu::kBlockThreads, 0, stream>>>(
        partial[0].data_as<float>(), kCentered ? partial[1].data_as<float>() : nullptr,
        P::ref(dout), P::ref(inp), mean_data, rstd.data_as<float>(), rows, channels,
        rows_per_chunk);
    MIXTRAIN_CUDA_CHECK_LAUNCH("normalize_backward_params_partial_kernel");
    normalize_backward_params_finish_kernel<<<gpu::grid_blocks(channels), gpu::kBlockThreads, 0,
                                              stream>>>(
        P::ref(dweight), partial[0].data_as<float>(), chunks, channels);
    MIXTRAIN_CUDA_CHECK_LAUNCH("normalize_backward_params_finish_kernel");
    if constexpr (kCentered) {
      normalize_backward_params_finish_kernel<<<gpu::grid_blocks(channels), gpu::kBlockThreads, 0,
                                                stream>>>(
          P::ref(*dbias), partial[1].data_as<float>(), chunks, channels);
      MIXTRAIN_CUDA_CHECK_LAUNCH("normalize_backward_params_finish_kernel");
    }
    const unsigned row_blocks = static_cast<unsigned>(
        gpu::checked_int(op, "row blocks", (rows + kRowsPerBlock - 1) / kRowsPerBlock));
    normalize_backward_input_kernel<kCentered><<<row_blocks, gpu::kBlockThreads, 0, stream>>>(
        P::ref(dinp), P::ref(dout), P::ref(inp), P::ref(weight), mean_data, rstd.data_as<float>(),
        rows, channels);
    MIXTRAIN_CUDA_CHECK_LAUNCH("normalize_backward_input_kernel");
  });
}

}  // namespace

void CudaBackend::do_layernorm_backward(const Tensor& dinp, const Tensor& dweight,
                                        const Tensor& dbias, const Tensor& dout, const Tensor& inp,
                                        const Tensor& weight, const Tensor& mean,
                                        const Tensor& rstd) {
  normalize_backward<true>(*this, "layernorm_backward", dinp, dweight, &dbias, dout, inp, weight,
                           &mean, rstd);
}

void CudaBackend::do_rmsnorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dout,
                                      const Tensor& inp, const Tensor& weight, const Tensor& rstd) {
  normalize_backward<false>(*this, "rmsnorm_backward", dinp, dweight, nullptr, dout, inp, weight,
                            nullptr, rstd);
}

}  // namespace mixtrain
