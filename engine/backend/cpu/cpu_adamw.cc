// Why: the optimizer step on fp32 master weights, the one op that touches
// every parameter's 16 bytes of state each step, so it is a single
// vectorized pass per chunk (master, m, v and the gradient read once) that
// also writes the compute-dtype copy of the weights. Its arithmetic follows
// torch.optim.AdamW's single-tensor path operation by operation, with the
// step's scalars computed in double as Python does and used as fp32.
#include <cmath>
#include <cstdint>
#include <string>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/cpu_elementwise.h"
#include "engine/backend/cpu/cpu_fp32_view.h"
#include "engine/backend/cpu/cpu_parallel.h"
#include "engine/common/cpu_features.h"
#include "engine/numerics/convert.h"

namespace mixtrain {

using cpu_ops::Fp32View;
using cpu_ops::kElementwiseChunk;
using cpu_ops::parallel_chunks;
using cpu_ops::ThreadScratch;

namespace {

// The fp32 scalars of one step.
struct AdamWScalars {
  float grad_scale;
  float decay;  // 1 - lr * weight_decay
  float beta1;
  float one_minus_beta1;
  float beta2;
  float one_minus_beta2;
  float bias_correction2_sqrt;  // sqrt(1 - beta2^step)
  float neg_step_size;          // -lr / (1 - beta1^step)
  float eps;
};

AdamWScalars adamw_scalars(const AdamWConfig& config) {
  const double lr = config.lr;
  const double beta1 = config.beta1;
  const double beta2 = config.beta2;
  const double step = static_cast<double>(config.step);
  AdamWScalars s;
  s.grad_scale = config.grad_scale;
  s.decay = static_cast<float>(1.0 - lr * config.weight_decay);
  s.beta1 = config.beta1;
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.beta2 = config.beta2;
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, step)));
  s.neg_step_size = static_cast<float>(-(lr / (1.0 - std::pow(beta1, step))));
  s.eps = config.eps;
  return s;
}

// One step on n elements, in torch.optim.AdamW's order:
//   param *= 1 - lr*wd;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g;
//   param += -step_size * m / (sqrt(v) / sqrt(bias_c2) + eps).
MIXTRAIN_MULTIVERSION void adamw_span(float* param, float* m, float* v, const float* grad,
                                      int64_t n, AdamWScalars s) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * s.grad_scale;
    const float m_new = s.beta1 * m[i] + s.one_minus_beta1 * g;
    const float v_new = s.beta2 * v[i] + s.one_minus_beta2 * g * g;
    const float denom = std::sqrt(v_new) / s.bias_correction2_sqrt + s.eps;
    param[i] = param[i] * s.decay + s.neg_step_size * m_new / denom;
    m[i] = m_new;
    v[i] = v_new;
  }
}

}  // namespace

void CpuBackend::do_adamw_update(const Tensor& master, const Tensor& m, const Tensor& v,
                                 const Tensor& grad, const AdamWConfig& config,
                                 const Tensor* param_out) {
  const int64_t numel = master.numel();
  const AdamWScalars scalars = adamw_scalars(config);
  const ThreadScratch scratch(*this, kElementwiseChunk);
  const Fp32View grad_view(grad);
  float* master_data = master.data_as<float>();
  float* m_data = m.data_as<float>();
  float* v_data = v.data_as<float>();
  char* out_bytes = param_out != nullptr ? static_cast<char*>(param_out->data()) : nullptr;
  const size_t out_element_size = param_out != nullptr ? dtype_size(param_out->dtype()) : 0;
  parallel_chunks(numel, kElementwiseChunk, [&](int64_t begin, int64_t n) {
    const float* g = grad_view.read(begin, n, scratch.mine());
    adamw_span(master_data + begin, m_data + begin, v_data + begin, g, n, scalars);
    if (out_bytes != nullptr) {
      convert(master_data + begin, DType::kF32, out_bytes + begin * out_element_size,
              param_out->dtype(), static_cast<size_t>(n));
    }
  });
}

}  // namespace mixtrain
