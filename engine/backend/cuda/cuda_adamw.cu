// Why: the fused AdamW step on the GPU: fp32 master weights and moments
// updated in one pass from a 16-bit (or fp32) gradient, optionally writing
// the new weights back in the compute dtype. The arithmetic follows
// torch.optim.AdamW's order so results track PyTorch and the CPU backend:
//   param *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   param -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
#include <cuda_runtime.h>

#include <cmath>

#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/cuda_dtype.cuh"
#include "engine/backend/cuda/cuda_error.h"
#include "engine/backend/cuda/cuda_kernel_utils.cuh"
#include "engine/backend/cuda/cuda_op_checks.h"
#include "engine/backend/op_checks.h"

namespace mixtrain {
namespace {

// The per-step scalars, computed once on the host (bias corrections in
// double, as PyTorch computes them in Python floats).
struct AdamWStep {
  float decay;                // 1 - lr * weight_decay
  float beta1, beta2, eps;
  float step_size;            // lr / (1 - beta1^t)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  float grad_scale;
};

// W elements per access: the fp32 state in 16-byte packs, the gradient and
// the weights written back in packs of the same count.
template <int W, class Ref>
__global__ void adamw_kernel(float* master, float* m, float* v, Ref grad, Ref param_out,
                             bool has_param_out, AdamWStep s, int64_t n) {
  gpu::for_each_pack<W>(n, [&](int64_t i, auto width) {
    constexpr int K = decltype(width)::value;
    float g[K], param[K], m_k[K], v_k[K];
    grad.template load_pack<K>(i, g);
    gpu::load_pack<K>(master, i, param);
    gpu::load_pack<K>(m, i, m_k);
    gpu::load_pack<K>(v, i, v_k);
    for (int j = 0; j < K; ++j) {
      const float gj = g[j] * s.grad_scale;
      const float decayed = param[j] * s.decay;
      m_k[j] = s.beta1 * m_k[j] + (1.0f - s.beta1) * gj;
      v_k[j] = s.beta2 * v_k[j] + (1.0f - s.beta2) * gj * gj;
      const float denom = sqrtf(v_k[j]) / s.bias_correction2_sqrt + s.eps;
      param[j] = decayed - s.step_size * m_k[j] / denom;
    }
    gpu::store_pack<K>(m, i, m_k);
    gpu::store_pack<K>(v, i, v_k);
    gpu::store_pack<K>(master, i, param);
    if (has_param_out) param_out.template store_pack<K>(i, param);
  });
}

}  // namespace

void CudaBackend::do_adamw_update(const Tensor& master, const Tensor& m, const Tensor& v,
                                  const Tensor& grad, const AdamWConfig& config,
                                  const Tensor* param_out) {
  const cudaStream_t stream = begin_op();
  const char* op = "adamw_update";
  const int64_t n = master.numel();
  const double t = static_cast<double>(config.step);
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(config.beta1), t);
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(config.beta2), t);
  const AdamWStep s{1.0f - config.lr * config.weight_decay,
                    config.beta1,
                    config.beta2,
                    config.eps,
                    static_cast<float>(config.lr / bias_correction1),
                    static_cast<float>(std::sqrt(bias_correction2)),
                    config.grad_scale};
  gpu::dispatch_compute({&grad, param_out}, op, [&](auto policy) {
    using P = decltype(policy);
    if (n == 0) return;
    constexpr int kWidth = P::kPackWidth < 4 ? P::kPackWidth : 4;  // 4 fp32 per 16 bytes
    gpu::dispatch_pack_width<kWidth>({&master, &m, &v, &grad, param_out}, [&](auto width) {
      constexpr int W = decltype(width)::value;
      adamw_kernel<W><<<gpu::grid_blocks(n / W), gpu::kBlockThreads, 0, stream>>>(
          master.data_as<float>(), m.data_as<float>(), v.data_as<float>(), P::ref(grad),
          param_out != nullptr ? P::ref(*param_out) : P::none(), param_out != nullptr, s, n);
      MIXTRAIN_CUDA_CHECK_LAUNCH("adamw_kernel");
    });
  });
}

}  // namespace mixtrain
