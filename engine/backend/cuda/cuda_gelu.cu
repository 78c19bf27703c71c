// Why: the MLP's GELU on the GPU (tanh approximation, as GPT-2 and llm.c),
// forward and backward side by side, in fp32 whatever the storage type,
// with 128-bit accesses when the tensors are aligned for them.
#include <cuda_runtime.h>

#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/cuda_dtype.cuh"
#include "engine/backend/cuda/cuda_error.h"
#include "engine/backend/cuda/cuda_kernel_utils.cuh"
#include "engine/backend/cuda/cuda_op_checks.h"
#include "engine/backend/op_checks.h"

namespace mixtrain {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kCubicCoefficient = 0.044715f;

// 0.5 (1 + tanh u) written as the logistic function 1 / (1 + e^(-2u)),
// u = sqrt(2/pi) (x + 0.044715 x^3): the same value, but without the
// cancellation 1 + tanh u suffers for very negative x, so small negative
// outputs keep their relative precision.
__device__ inline float gelu_gate(float x) {
  const float u = kSqrt2OverPi * (x + kCubicCoefficient * x * x * x);
  return 1.0f / (1.0f + expf(-2.0f * u));
}

// out = 0.5 x (1 + tanh u) = x * gate.
template <int W, class Ref> __global__ void gelu_forward_kernel(Ref out, Ref inp, int64_t n) {
  gpu::for_each_pack<W>(n, [&](int64_t i, auto width) {
    constexpr int K = decltype(width)::value;
    float x[K];
    inp.template load_pack<K>(i, x);
    for (int j = 0; j < K; ++j) x[j] *= gelu_gate(x[j]);
    out.template store_pack<K>(i, x);
  });
}

// dinp += dout * d/dx gelu(x), with d/dx = gate + x * 2 gate (1 - gate) *
// du/dx, since 0.5 (1 - tanh^2 u) = 2 gate (1 - gate).
template <int W, class Ref>
__global__ void gelu_backward_kernel(Ref dinp, Ref dout, Ref inp, int64_t n) {
  gpu::for_each_pack<W>(n, [&](int64_t i, auto width) {
    constexpr int K = decltype(width)::value;
    float x[K], d[K], acc[K];
    inp.template load_pack<K>(i, x);
    dout.template load_pack<K>(i, d);
    dinp.template load_pack<K>(i, acc);
    for (int j = 0; j < K; ++j) {
      const float gate = gelu_gate(x[j]);
      const float du_dx = kSqrt2OverPi * (1.0f + 3.0f * kCubicCoefficient * x[j] * x[j]);
      const float local_grad = gate + x[j] * 2.0f * gate * (1.0f - gate) * du_dx;
      acc[j] += local_grad * d[j];
    }
    dinp.template store_pack<K>(i, acc);
  });
}

}  // namespace

void CudaBackend::do_gelu_forward(const Tensor& out, const Tensor& inp) {
  const cudaStream_t stream = begin_op();
  const int64_t n = inp.numel();
  gpu::dispatch_compute({&out, &inp}, "gelu_forward", [&](auto policy) {
    using P = decltype(policy);
    if (n == 0) return;
    gpu::dispatch_pack_width<P::kPackWidth>({&out, &inp}, [&](auto width) {
      constexpr int W = decltype(width)::value;
      gelu_forward_kernel<W><<<gpu::grid_blocks(n / W), gpu::kBlockThreads, 0, stream>>>(
          P::ref(out), P::ref(inp), n);
      MIXTRAIN_CUDA_CHECK_LAUNCH("gelu_forward_kernel");
    });
  });
}

void CudaBackend::do_gelu_backward(const Tensor& dinp, const Tensor& dout, const Tensor& inp) {
  const cudaStream_t stream = begin_op();
  const int64_t n = inp.numel();
  gpu::dispatch_compute({&dinp, &dout, &inp}, "gelu_backward", [&](auto policy) {
    using P = decltype(policy);
    if (n == 0) return;
    gpu::dispatch_pack_width<P::kPackWidth>({&dinp, &dout, &inp}, [&](auto width) {
      constexpr int W = decltype(width)::value;
      gelu_backward_kernel<W><<<gpu::grid_blocks(n / W), gpu::kBlockThreads, 0, stream>>>(
          P::ref(dinp), P::ref(dout), P::ref(inp), n);
      MIXTRAIN_CUDA_CHECK_LAUNCH("gelu_backward_kernel");
    });
  });
}

}  // namespace mixtrain
