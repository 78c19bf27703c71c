// Why: causal multi-head self-attention on the GPU, forward and backward
// side by side (llm.c's attention_forward/backward shape): batched cuBLAS
// GEMMs per head around causal softmax kernels. q, k and v are read in
// place from qkv (B,T,3C): for one batch row b, head h's (T,HS) matrix has
// row stride 3C and heads lie HS apart, so each GEMM is strided-batched
// over the NH heads and looped over B. Scores and their gradients are
// fp32 workspace; the GEMM inputs use qkv's dtype (tensor cores), except
// that the score gradient dS stays fp32 when qkv is fp16, as on the CPU:
// dS is a difference of products far below fp16's smallest normal (6e-5)
// once gradients are unscaled, where fp16 keeps a few bits or none.
#include <cuda_runtime.h>

#include <cmath>

#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/cuda_dtype.cuh"
#include "engine/backend/cuda/cuda_error.h"
#include "engine/backend/cuda/cuda_gemm.h"
#include "engine/backend/cuda/cuda_kernel_utils.cuh"
#include "engine/backend/cuda/cuda_op_checks.h"
#include "engine/backend/op_checks.h"

namespace mixtrain {
namespace {

using gpu::kWarpSize;
using gpu::warp_max;
using gpu::warp_sum;

constexpr int kRowsPerBlock = gpu::kBlockThreads / kWarpSize;

using op_checks::AttentionShape;

// Address of element `index` of t.
char* element(const Tensor& t, int64_t index) {
  return static_cast<char*>(t.data()) + index * static_cast<int64_t>(dtype_size(t.dtype()));
}

// Warp `row` of rows (B*NH*T) rows of length T, or -1 past the end.
__device__ inline int64_t warp_row(int64_t rows) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  return row < rows ? row : -1;
}

// att[row, j] = softmax over j <= t of preatt[row, j] (t = row % T, scores
// already scaled), 0 above the diagonal.
template <class Ref>
__global__ void causal_softmax_forward_kernel(Ref att, const float* preatt, int64_t rows,
                                              int64_t seq) {
  const int64_t row = warp_row(rows);
  if (row < 0) return;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t t = row % seq;
  const float* scores = preatt + row * seq;
  float local_max = -INFINITY;
  for (int64_t j = lane; j <= t; j += kWarpSize) local_max = fmaxf(local_max, scores[j]);
  const float row_max = warp_max(local_max);
  float local_sum = 0.0f;
  for (int64_t j = lane; j <= t; j += kWarpSize) local_sum += expf(scores[j] - row_max);
  const float inv_sum = 1.0f / warp_sum(local_sum);
  for (int64_t j = lane; j < seq; j += kWarpSize) {
    att.store(row * seq + j, j <= t ? expf(scores[j] - row_max) * inv_sum : 0.0f);
  }
}

// dpreatt[row, j] = scale * att[row, j] * (datt[row, j] - sum_k att[row, k]
// datt[row, k]) for j <= t, 0 above the diagonal: the softmax backward with
// the forward's score scaling folded in.
template <class Ref>
__global__ void causal_softmax_backward_kernel(Ref dpreatt, Ref att, const float* datt,
                                               float scale, int64_t rows, int64_t seq) {
  const int64_t row = warp_row(rows);
  if (row < 0) return;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t t = row % seq;
  const int64_t base = row * seq;
  float local_dot = 0.0f;
  for (int64_t j = lane; j <= t; j += kWarpSize) local_dot += att.load(base + j) * datt[base + j];
  const float dot = warp_sum(local_dot);
  for (int64_t j = lane; j < seq; j += kWarpSize) {
    const float grad = j <= t ? scale * att.load(base + j) * (datt[base + j] - dot) : 0.0f;
    dpreatt.store(base + j, grad);
  }
}

unsigned row_blocks(const char* op, int64_t rows) {
  return static_cast<unsigned>(
      gpu::checked_int(op, "row blocks", (rows + kRowsPerBlock - 1) / kRowsPerBlock));
}

}  // namespace

void CudaBackend::do_attention_forward(const Tensor& out, const Tensor& att, const Tensor& qkv,
                                       int n_head) {
  const cudaStream_t stream = begin_op();
  const char* op = "attention_forward";
  const AttentionShape s = op_checks::attention_shape(qkv, n_head);
  const int64_t B = s.batch, T = s.seq, C = s.channels, NH = s.heads, HS = s.head_size;
  if (B * T * C == 0) return;
  const DType g = qkv.dtype();  // GEMM input dtype
  const bool att_copy = att.dtype() != g;
  const bool out_direct = cublas_writes(g, out.dtype());
  const std::vector<Tensor> buffers =
      scratch(attention_forward_scratch({B, T, C, NH}, g, att.dtype(), out.dtype()));
  const Tensor& preatt = buffers[0];
  const Tensor& att_g = att_copy ? buffers[1] : att;
  const Tensor& y = out_direct ? out : buffers[2];
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));

  // preatt[b,h] (T,T) = scale * q[b,h] (T,HS) @ k[b,h]^T.
  for (int64_t b = 0; b < B; ++b) {
    const int64_t row0 = b * T * 3 * C;
    gpu::gemm_row_major(blas(), T, T, HS, {element(qkv, row0), g, 3 * C, HS, false},
                        {element(qkv, row0 + C), g, 3 * C, HS, true},
                        {element(preatt, b * NH * T * T), DType::kF32, T, T * T}, NH, scale,
                        0.0f);
  }
  gpu::dispatch_compute({&att}, op, [&](auto policy) {
    using P = decltype(policy);
    causal_softmax_forward_kernel<<<row_blocks(op, B * NH * T), gpu::kBlockThreads, 0, stream>>>(
        P::ref(att), preatt.data_as<float>(), B * NH * T, T);
    MIXTRAIN_CUDA_CHECK_LAUNCH("causal_softmax_forward_kernel");
  });
  if (att_copy) cast(att_g, att);
  // y[b, :, h] (T,HS) = att[b,h] (T,T) @ v[b,h] (T,HS), written in (B,T,C).
  for (int64_t b = 0; b < B; ++b) {
    gpu::gemm_row_major(blas(), T, HS, T, {element(att_g, b * NH * T * T), g, T, T * T, false},
                        {element(qkv, b * T * 3 * C + 2 * C), g, 3 * C, HS, false},
                        {element(y, b * T * C), y.dtype(), C, HS}, NH, 1.0f, 0.0f);
  }
  if (!out_direct) cast(out, y);
}

void CudaBackend::do_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                                        const Tensor& att, int n_head) {
  const cudaStream_t stream = begin_op();
  const char* op = "attention_backward";
  const AttentionShape s = op_checks::attention_shape(qkv, n_head);
  const int64_t B = s.batch, T = s.seq, C = s.channels, NH = s.heads, HS = s.head_size;
  if (B * T * C == 0) return;
  const DType g = qkv.dtype();  // GEMM input dtype
  const DType gs = attention_score_gradient_dtype(g);  // dS and the GEMMs reading it
  const bool dout_copy = dout.dtype() != g;
  const bool att_copy = att.dtype() != g;
  const bool qkv_copy = gs != g;
  const bool dqkv_direct = cublas_writes(g, dqkv.dtype()) && cublas_writes(gs, dqkv.dtype());
  const std::vector<Tensor> buffers = scratch(
      attention_backward_scratch({B, T, C, NH}, g, dout.dtype(), att.dtype(), dqkv.dtype()));
  const Tensor& datt = buffers[0];
  const Tensor& dpreatt = buffers[1];
  const Tensor& dout_g = dout_copy ? buffers[2] : dout;
  const Tensor& att_g = att_copy ? buffers[3] : att;
  const Tensor& dqkv_acc = dqkv_direct ? dqkv : buffers[4];
  const Tensor& qkv_s = qkv_copy ? buffers[5] : qkv;  // q and k for the dS GEMMs
  if (dout_copy) cast(dout_g, dout);
  if (att_copy) cast(att_g, att);
  if (qkv_copy) cast(qkv_s, qkv);
  if (!dqkv_direct) cast(dqkv_acc, dqkv);
  const DType acc = dqkv_acc.dtype();
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));

  for (int64_t b = 0; b < B; ++b) {
    const int64_t row0 = b * T * 3 * C;
    // datt[b,h] (T,T) = dout[b,h] (T,HS) @ v[b,h]^T.
    gpu::gemm_row_major(blas(), T, T, HS, {element(dout_g, b * T * C), g, C, HS, false},
                        {element(qkv, row0 + 2 * C), g, 3 * C, HS, true},
                        {element(datt, b * NH * T * T), DType::kF32, T, T * T}, NH, 1.0f, 0.0f);
    // dv[b,h] (T,HS) += att[b,h]^T (T,T) @ dout[b,h] (T,HS).
    gpu::gemm_row_major(blas(), T, HS, T, {element(att_g, b * NH * T * T), g, T, T * T, true},
                        {element(dout_g, b * T * C), g, C, HS, false},
                        {element(dqkv_acc, row0 + 2 * C), acc, 3 * C, HS}, NH, 1.0f, 1.0f);
  }
  gpu::dispatch_compute({&dpreatt, &att}, op, [&](auto policy) {
    using P = decltype(policy);
    causal_softmax_backward_kernel<<<row_blocks(op, B * NH * T), gpu::kBlockThreads, 0,
                                     stream>>>(P::ref(dpreatt), P::ref(att),
                                               datt.data_as<float>(), scale, B * NH * T, T);
    MIXTRAIN_CUDA_CHECK_LAUNCH("causal_softmax_backward_kernel");
  });
  for (int64_t b = 0; b < B; ++b) {
    const int64_t row0 = b * T * 3 * C;
    // dq[b,h] (T,HS) += dpreatt[b,h] (T,T) @ k[b,h] (T,HS).
    gpu::gemm_row_major(blas(), T, HS, T,
                        {element(dpreatt, b * NH * T * T), gs, T, T * T, false},
                        {element(qkv_s, row0 + C), gs, 3 * C, HS, false},
                        {element(dqkv_acc, row0), acc, 3 * C, HS}, NH, 1.0f, 1.0f);
    // dk[b,h] (T,HS) += dpreatt[b,h]^T (T,T) @ q[b,h] (T,HS).
    gpu::gemm_row_major(blas(), T, HS, T,
                        {element(dpreatt, b * NH * T * T), gs, T, T * T, true},
                        {element(qkv_s, row0), gs, 3 * C, HS, false},
                        {element(dqkv_acc, row0 + C), acc, 3 * C, HS}, NH, 1.0f, 1.0f);
  }
  if (!dqkv_direct) cast(dqkv, dqkv_acc);
}

}  // namespace mixtrain
