// Why: GPT-2 (model.h's interface) with forward and backward written by
// hand on the Backend (llm.c style). Its activations are allocated for a
// batch shape (B,T) on first use and reused while (B,T) stays the same;
// with activation checkpointing it keeps fewer of them and the backward
// recomputes the rest block by block, with the same ops on the same
// inputs, so the gradients are the ones it would compute keeping
// everything.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/backend/backend.h"
#include "engine/model/gpt_activations.h"
#include "engine/model/model.h"

namespace mixtrain {

class Gpt final : public Model {
 public:
  // A model of `config` (validated) computing in `compute_dtype` (fp32,
  // bf16 or fp16) with gradients in `grad_dtype` (compute_dtype or fp32),
  // whose layout pads units to `unit_alignment` (ParameterLayout), keeping
  // what `checkpointing` says for the backward (gpt_activations.h). Throws
  // EngineError(kInvalidArgument) naming what is wrong.
  Gpt(Backend& backend, GptConfig config, DType compute_dtype, DType grad_dtype,
      int64_t unit_alignment = 1,
      config::ActivationCheckpointing checkpointing = config::ActivationCheckpointing::kNone);
  ~Gpt() override;
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  const GptConfig& config() const override { return config_; }
  const ParameterLayout& layout() const override { return layout_; }
  DType compute_dtype() const override { return compute_dtype_; }
  DType grad_dtype() const override { return grad_dtype_; }
  config::ActivationCheckpointing checkpointing() const override { return checkpointing_; }

  // Four per block (qkv, attention projection, MLP up and down), plus the
  // output head when it is quantized: block l's four are 4l..4l+3, the
  // head 4 * layers.
  int64_t fp8_gemm_count(bool quantize_head) const override;
  void set_fp8(Fp8Linear* fp8, bool quantize_head) override;
  const ParameterInfo& fp8_gemm_weight(int64_t gemm) const override;

  using Model::backward;
  using Model::forward;
  float forward(ModelWeights& weights, const Tensor& tokens, const Tensor& targets) override;
  void forward(const Tensor& params, const Tensor& tokens) override;
  Tensor logits() const override;
  void backward(ModelWeights& weights, float dloss) override;

 private:
  // Checks tokens (and targets when given), (re)allocates the activations
  // for their (B,T) and enqueues the ids' upload on the compute stream
  // (from pinned memory on a GPU: no thread waits for it).
  void prepare_forward(const Tensor& tokens, const Tensor* targets);
  // The forward pass up to the logits (gpt_forward.cc).
  void run_forward(ModelWeights& weights);
  // out = in W^T + b for the `index`-th linear layer (weight, bias) of block
  // `layer`, and gelu_out = GELU(out) when given; in fp8 when the model has
  // an Fp8Linear (`again`: a recompute, which quantizes as the forward did
  // and records nothing).
  void linear_forward(ModelWeights& weights, const Tensor& out, const Tensor& in, int64_t layer,
                      int64_t index, BlockParameter weight, BlockParameter bias,
                      const Tensor* gelu_out, bool again);
  // Block l's forward from its input through the MLP's GELU, the tensors
  // its backward reads; then, unless `again`, the MLP's projection and
  // residual3. Block l's weights are acquired.
  void block_forward(ModelWeights& weights, int64_t l, bool again);
  // Refills the tensors of block l that checkpointing does not keep, as the
  // forward wrote them; block l's weights are acquired.
  void recompute_block(ModelWeights& weights, int64_t l);
  // Block l's input: the previous block's residual3, or the embeddings.
  const Tensor& block_input(int64_t l) const;
  // The backward pass (gpt_backward.cc) with the logits' gradient scale.
  void run_backward(ModelWeights& weights, float dloss_per_position);

  Backend& backend_;
  GptConfig config_;
  ParameterLayout layout_;
  DType compute_dtype_;
  DType grad_dtype_;
  config::ActivationCheckpointing checkpointing_;
  std::unique_ptr<GptActivations> acts_;
  std::unique_ptr<GptActivationGrads> grad_acts_;
  Fp8Linear* fp8_ = nullptr;
  bool fp8_head_ = false;
  bool logits_valid_ = false;      // acts_->logits holds the last forward's logits
  bool backward_pending_ = false;  // a forward with targets awaits its backward
};

}  // namespace mixtrain
