// Why: the CPU implementation of Backend. GEMMs go through oneDNN (AMX /
// AVX512-BF16 for bf16, AVX-512 for fp32) when it is present; every other
// op is an OpenMP loop compiled per ISA (MIXTRAIN_MULTIVERSION). The
// device and host pools are separate, separately counted heaps so tests
// can see what offload moved. Ops live in one file per layer
// (cpu_<layer>.cc, forward and backward side by side).
#pragma once

#include <memory>

#include "engine/backend/backend.h"

namespace mixtrain {

class CpuGemm;  // GEMM dispatcher and oneDNN primitive cache (cpu_gemm.cc)

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  DeviceType device_type() const override { return DeviceType::kCpu; }
  int device_index() const override { return 0; }
  void allow_tf32(bool) override {}

  void copy_from_host(const Tensor& dst, const void* src) override;
  void copy_to_host(void* dst, const Tensor& src) override;

  std::unique_ptr<Event> record_event(StreamKind stream) override;
  void wait_event(StreamKind stream, const Event& event) override;
  void synchronize() override {}

 private:
  // The ops (backend.h), their arguments checked already.
  void do_copy(const Tensor& dst, const Tensor& src, StreamKind stream) override;
  void do_cast(const Tensor& dst, const Tensor& src) override;
  void do_fill(const Tensor& t, float value) override;
  void do_set_zero(const Tensor& t) override;
  void do_add(const Tensor& out, const Tensor& a, const Tensor& b) override;

  void do_matmul(const Tensor& c, const Tensor& a, const Tensor& b,
                 const MatmulOptions& options) override;
  void do_bias_backward(const Tensor& dbias, const Tensor& dout) override;

  float do_amax(const Tensor& src) override;
  void do_quantize_fp8_into(const Tensor& codes, const Tensor& src, float scale,
                            const Tensor& stats, int64_t slot) override;
  int64_t do_mx_quantize(const Tensor& codes, const Tensor& block_scales, const Tensor& src,
                         MxAxis axis) override;
  void do_dequantize_fp8(const Tensor& dst, const Fp8Operand& src) override;

  void do_embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table,
                            bool accumulate) override;
  void do_embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids) override;
  void do_layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                            const Tensor& inp, const Tensor& weight, const Tensor& bias,
                            float eps) override;
  void do_layernorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias,
                             const Tensor& dout, const Tensor& inp, const Tensor& weight,
                             const Tensor& mean, const Tensor& rstd) override;
  void do_rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& inp,
                          const Tensor& weight, float eps) override;
  void do_rmsnorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dout,
                           const Tensor& inp, const Tensor& weight, const Tensor& rstd) override;
  void do_rope_forward(const Tensor& out, const Tensor& inp, const Tensor& freqs) override;
  void do_rope_backward(const Tensor& dinp, const Tensor& dout, const Tensor& freqs) override;
  void do_gelu_forward(const Tensor& out, const Tensor& inp) override;
  void do_gelu_backward(const Tensor& dinp, const Tensor& dout, const Tensor& inp) override;
  void do_attention_forward(const Tensor& out, const Tensor& att, const Tensor& qkv,
                            int n_head) override;
  void do_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                             const Tensor& att, int n_head) override;
  void do_softmax_cross_entropy(const Tensor& losses, const Tensor* dlogits, const Tensor& logits,
                                const Tensor& targets, float dloss, int64_t classes) override;

  void do_adamw_update(const Tensor& master, const Tensor& m, const Tensor& v, const Tensor& grad,
                       const AdamWConfig& config, const Tensor* param_out) override;
  double do_sum_squares(std::span<const Tensor> tensors) override;
  NonFiniteCheck do_unscale_and_check(std::span<const Tensor> tensors, float inv_scale) override;
  MagnitudeHistogram do_magnitude_histogram(std::span<const Tensor> tensors) override;

 public:
  // CpuGemm::runs_without_staging.
  bool gemm_runs_without_staging(DType type);

 private:
  std::unique_ptr<CpuGemm> gemm_;
};

}  // namespace mixtrain
