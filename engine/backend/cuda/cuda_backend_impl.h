// Why: the CUDA implementation of Backend, declared for the files that
// implement it: cuda_backend.cc (setup, events, copies; memory and streams
// are cuda_memory.cc's) and one cuda_<layer>.cu per layer with its kernels,
// forward and backward side by side. Code outside backend/cuda/ reaches it only through cuda_backend.h,
// which needs no CUDA headers.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/cuda_gemm.h"
#include "engine/backend/cuda_workspace.h"
#include "engine/backend/cuda/cuda_memory.h"

namespace mixtrain {

class CudaBackend final : public Backend {
 public:
  // Takes device `device`: two non-blocking streams, a cuBLAS handle and
  // its workspace. Throws EngineError(kUnavailable) when the device cannot
  // be used.
  explicit CudaBackend(int device);
  // Waits for all enqueued work, then releases streams and handles.
  ~CudaBackend() override;

  std::string name() const override { return "cuda:" + std::to_string(device_); }
  DeviceType device_type() const override { return DeviceType::kCuda; }
  int device_index() const override { return device_; }
  void allow_tf32(bool allowed) override { tf32_ = allowed; }
  // No matmul_fp8 below sm_89 (no fp8 tensor cores).
  OpSupport supports(BackendOp op, std::span<const DType> dtypes) const override;
  void leave_device_memory(int64_t bytes) override { memory_->leave_free(bytes); }

  void copy_from_host(const Tensor& dst, const void* src) override;
  void copy_to_host(void* dst, const Tensor& src) override;

  std::unique_ptr<Event> record_event(StreamKind stream) override;
  void wait_event(StreamKind stream, const Event& event) override;
  void synchronize() override;

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
  void do_matmul_fp8(const Tensor& c, const Fp8Operand& a, const Fp8Operand& b,
                     const MatmulOptions& options) override;

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
  // ---- for the op files -------------------------------------------------
  // Makes this backend's device current on the calling thread and returns
  // the compute stream that every op enqueues its work on.
  cudaStream_t begin_op();
  // The cuBLAS and cuBLASLt handles (the compute stream, one workspace)
  // and whether fp32 GEMMs may use TF32.
  gpu::Blas blas() const {
    return {cublas_.get(),          tf32_,
            cublas_lt_.get(),       memory_->compute(),
            cublas_workspace_.data(), cublas_workspace_.nbytes(),
            &lt_algorithms_};
  }
  // One op's temporary device buffers, one tensor per request in order,
  // carved (256-byte aligned) from a grow-only workspace counted as
  // MemoryCategory::kWorkspace. Contents are uninitialized. They stay valid
  // until the next scratch() call, so an op asks once for everything it
  // needs and calls no other op that uses scratch while it holds them
  // (ops that do: matmul, embedding_backward, layernorm_backward,
  // attention_*, bias_backward, sum_squares, unscale_and_check).
  std::vector<Tensor> scratch(const std::vector<ScratchRequest>& requests);

 private:
  struct CublasDeleter {
    void operator()(cublasHandle_t handle) const;
    void operator()(cublasLtHandle_t handle) const;
  };
  using CublasHandle = std::unique_ptr<cublasContext, CublasDeleter>;
  using CublasLtHandle = std::unique_ptr<cublasLtContext, CublasDeleter>;

  explicit CudaBackend(std::shared_ptr<CudaMemory> memory);
  cudaStream_t stream(StreamKind kind) const;

  // Members are destroyed bottom-up: the cuBLAS handle goes before the
  // workspace it uses; the streams live in memory_, which tensors that
  // outlive the backend keep alive.
  std::shared_ptr<CudaMemory> memory_;
  int device_;
  int compute_capability_;  // 90 for sm_90
  bool tf32_ = false;  // fp32 GEMMs may use TF32 tensor cores
  Tensor cublas_workspace_;  // handed to cuBLAS, counted as workspace
  CublasHandle cublas_;
  CublasLtHandle cublas_lt_;  // shares cublas_workspace_: both run on the compute stream
  mutable gpu::LtAlgorithms lt_algorithms_;  // filled by the const blas()'s users
  Tensor scratch_;  // grows to the largest scratch() request
};

}  // namespace mixtrain
