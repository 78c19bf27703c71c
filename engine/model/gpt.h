// Why: GPT-2 forward and backward written by hand on the Backend (llm.c
// style). The model owns no weights: forward and backward take the flat
// parameter tensor and the flat gradient tensor, or a GptWeights that
// hands them out unit by unit, so the trainer (and ZeRO) owns and
// partitions them; per-parameter views come from ParameterLayout.
// It owns only its activations, allocated for a batch shape (B,T) on first
// use and reused while (B,T) stays the same; with activation checkpointing
// it keeps fewer of them and the backward recomputes the rest block by
// block, with the same ops on the same inputs, so the gradients are the
// ones it would compute keeping everything.
//
// Usage per micro-batch:
//   float loss = gpt.forward(params, tokens, targets);
//   gpt.backward(params, grads, loss_scale / grad_accum);
// backward ADDS into grads (zero them at the start of an accumulation).
#pragma once

#include <cstdint>
#include <memory>

#include "engine/backend/backend.h"
#include "engine/model/fp8_linear.h"
#include "engine/model/gpt_activations.h"
#include "engine/model/gpt_config.h"
#include "engine/model/gpt_weights.h"
#include "engine/model/parameter_layout.h"

namespace mixtrain {

class Gpt {
 public:
  // A model of `config` (validated) computing in `compute_dtype` (fp32,
  // bf16 or fp16) with gradients in `grad_dtype` (compute_dtype or fp32),
  // whose layout pads units to `unit_alignment` (ParameterLayout), keeping
  // what `checkpointing` says for the backward (gpt_activations.h). Throws
  // EngineError(kInvalidArgument) naming what is wrong.
  Gpt(Backend& backend, GptConfig config, DType compute_dtype, DType grad_dtype,
      int64_t unit_alignment = 1,
      config::ActivationCheckpointing checkpointing = config::ActivationCheckpointing::kNone);
  ~Gpt();
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  // The number of fp8 GEMMs of `config`: four per block (qkv, attention
  // projection, MLP up and down), plus the output head when it is quantized.
  static int64_t fp8_gemm_count(const GptConfig& config, bool quantize_head);
  // Runs the blocks' linear layers (and the head when quantize_head) in fp8
  // through `fp8` (numbered as fp8_gemm_count counts them: block l's four
  // are 4l..4l+3, the head 4 * layers); null: every GEMM in the compute
  // dtype. `fp8` must outlive the model's passes.
  void set_fp8(Fp8Linear* fp8, bool quantize_head);
  // The weight fp8 GEMM `gemm` multiplies by (numbered as above).
  const ParameterInfo& fp8_gemm_weight(int64_t gemm) const;

  const GptConfig& config() const { return config_; }
  const ParameterLayout& layout() const { return layout_; }
  DType compute_dtype() const { return compute_dtype_; }
  DType grad_dtype() const { return grad_dtype_; }
  config::ActivationCheckpointing checkpointing() const { return checkpointing_; }

  // Runs the model on tokens (B,T) int32 in host-readable memory, ids in
  // [0, vocab), 0 < T <= seq_len, with params (compute dtype,
  // layout().numel() elements), and returns the mean over the B*T
  // positions of the cross-entropy of targets ((B,T) int32, host-readable,
  // ids in [0, vocab)), computed in fp32. Afterwards logits() is valid and
  // backward() may be called once. Throws EngineError(kInvalidArgument)
  // for bad shapes, dtypes or ids, before any work is done.
  float forward(const Tensor& params, const Tensor& tokens, const Tensor& targets);
  // The same with the parameters handed out by `weights` (which must stay
  // alive until the matching backward returns).
  float forward(GptWeights& weights, const Tensor& tokens, const Tensor& targets);
  // The same without targets (inference): computes only logits(); a
  // backward() cannot follow. tokens are uploaded asynchronously: the
  // caller writes them again only after reading something back (logits)
  // or after the backend's synchronize().
  void forward(const Tensor& params, const Tensor& tokens);

  // The (B,T,Vp) logits (compute dtype, the model's memory) of the last
  // forward: the first V columns of each row are the vocabulary's, the
  // rest the padding's (config().padded_vocab(), zero); overwritten by the next forward. Throws EngineError
  // (kInvalidArgument) when no forward ran or a backward has since reused
  // the memory for the logits' gradient.
  Tensor logits() const;

  // ADDS into grads (grad_dtype, layout().numel() elements, same layout as
  // params) the gradient, with respect to the parameters, of
  //   dloss * L,   L = the mean loss returned by the last forward,
  // so a trainer passes dloss = loss_scale / grad_accum. params must be the
  // tensor that forward saw, unchanged. Requires a forward with targets
  // since the last backward; throws EngineError(kInvalidArgument) otherwise
  // and for bad dtypes or sizes.
  void backward(const Tensor& params, const Tensor& grads, float dloss);
  // The same through `weights` (the object the forward used, or one handing
  // out the same parameters).
  void backward(GptWeights& weights, float dloss);

 private:
  // Checks a flat params tensor (compute dtype, layout().numel()).
  void check_params(const char* op, const Tensor& params) const;
  // Checks tokens (and targets when given), (re)allocates the activations
  // for their (B,T) and enqueues the ids' upload on the compute stream
  // (from pinned memory on a GPU: no thread waits for it).
  void prepare_forward(const Tensor& tokens, const Tensor* targets);
  // The forward pass up to the logits (gpt_forward.cc).
  void run_forward(GptWeights& weights);
  // out = in W^T + b for the `index`-th linear layer (weight, bias) of block
  // `layer`, and gelu_out = GELU(out) when given; in fp8 when the model has
  // an Fp8Linear (`again`: a recompute, which quantizes as the forward did
  // and records nothing).
  void linear_forward(GptWeights& weights, const Tensor& out, const Tensor& in, int64_t layer,
                      int64_t index, BlockParameter weight, BlockParameter bias,
                      const Tensor* gelu_out, bool again);
  // Block l's forward from its input through the MLP's GELU, the tensors
  // its backward reads; then, unless `again`, the MLP's projection and
  // residual3. Block l's weights are acquired.
  void block_forward(GptWeights& weights, int64_t l, bool again);
  // Refills the tensors of block l that checkpointing does not keep, as the
  // forward wrote them; block l's weights are acquired.
  void recompute_block(GptWeights& weights, int64_t l);
  // Block l's input: the previous block's residual3, or the embeddings.
  const Tensor& block_input(int64_t l) const;
  // The backward pass (gpt_backward.cc) with the logits' gradient scale.
  void run_backward(GptWeights& weights, float dloss_per_position);

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
