// Why: the one model interface the trainer, ZeRO, text generation and the
// tools use, so that an architecture is a class of its own beside the
// others (Gpt today) and nothing above engine/model/ names one. A model
// owns no weights: its passes read parameters and write gradients through
// ModelWeights, unit by unit of its ParameterLayout, so the trainer (and
// ZeRO) owns and partitions them. It owns only its activations.
//
// Usage per micro-batch:
//   float loss = model.forward(weights, tokens, targets);
//   model.backward(weights, loss_scale / grad_accum);
// backward ADDS into the gradients (zero them at the start of an
// accumulation).
#pragma once

#include <cstdint>
#include <memory>

#include "engine/backend/backend.h"
#include "engine/config/job_spec.h"
#include "engine/model/fp8_linear.h"
#include "engine/model/gpt_config.h"
#include "engine/model/model_weights.h"
#include "engine/model/parameter_layout.h"

namespace mixtrain {

class Model {
 public:
  virtual ~Model() = default;

  // The shape the model was built for (validated).
  virtual const GptConfig& config() const = 0;
  // The map of the flat parameter buffer the passes read.
  virtual const ParameterLayout& layout() const = 0;
  // fp32, bf16 or fp16: the parameters' and activations' dtype.
  virtual DType compute_dtype() const = 0;
  // The gradients' dtype: the compute dtype or fp32.
  virtual DType grad_dtype() const = 0;
  virtual config::ActivationCheckpointing checkpointing() const = 0;

  // The number of the model's linear layers that run in fp8: those of the
  // blocks, and the output head when quantize_head.
  virtual int64_t fp8_gemm_count(bool quantize_head) const = 0;
  // Runs those layers through `fp8`, whose recipe numbers fp8_gemm_count
  // GEMMs; null: every GEMM in the compute dtype. `fp8` must outlive the
  // model's passes.
  virtual void set_fp8(Fp8Linear* fp8, bool quantize_head) = 0;
  // The weight fp8 GEMM `gemm` multiplies by.
  virtual const ParameterInfo& fp8_gemm_weight(int64_t gemm) const = 0;

  // Runs the model on tokens (B,T) int32 in host-readable memory, ids in
  // [0, vocab), 0 < T <= seq_len, with the parameters `weights` hands out
  // (it must stay alive until the matching backward returns), and returns
  // the mean over the B*T positions of the cross-entropy of targets ((B,T)
  // int32, host-readable, ids in [0, vocab)), computed in fp32. Afterwards
  // logits() is valid and backward() may be called once. Throws
  // EngineError(kInvalidArgument) for bad shapes, dtypes or ids, before any
  // work is done.
  virtual float forward(ModelWeights& weights, const Tensor& tokens, const Tensor& targets) = 0;
  // The same without targets (inference) on the flat `params` (compute
  // dtype, layout().numel() elements): computes only logits(); a backward()
  // cannot follow. tokens are uploaded asynchronously: the caller writes
  // them again only after reading something back (logits) or after the
  // backend's synchronize().
  virtual void forward(const Tensor& params, const Tensor& tokens) = 0;
  // The (B,T,Vp) logits (compute dtype, the model's memory) of the last
  // forward: the first V columns of each row are the vocabulary's, the rest
  // the padding's (config().padded_vocab(), zero); overwritten by the next
  // forward. Throws EngineError(kInvalidArgument) when no forward ran or a
  // backward has since reused the memory.
  virtual Tensor logits() const = 0;
  // ADDS into the gradients `weights` hands out the gradient, with respect
  // to the parameters, of dloss * L, L the mean loss the last forward
  // returned (a trainer passes loss_scale / grad_accum). The parameters
  // must be those the forward saw. Requires a forward with targets since
  // the last backward; throws EngineError(kInvalidArgument) otherwise.
  virtual void backward(ModelWeights& weights, float dloss) = 0;

  // forward with targets and backward on two flat buffers: params (compute
  // dtype) and grads (grad dtype), each layout().numel() elements in
  // layout order. Throws EngineError(kInvalidArgument) naming a bad one.
  float forward(const Tensor& params, const Tensor& tokens, const Tensor& targets);
  void backward(const Tensor& params, const Tensor& grads, float dloss);

 protected:
  // Checks a flat params tensor for `op`: compute dtype, layout().numel().
  void check_params(const char* op, const Tensor& params) const;
};

// The model `config` describes, computing in `compute_dtype` with
// gradients in `grad_dtype`, its layout's units padded to `unit_alignment`,
// keeping what `checkpointing` says for the backward: the one place that
// picks a model's class. Throws EngineError(kInvalidArgument) naming what
// is wrong.
std::unique_ptr<Model> make_model(
    Backend& backend, const GptConfig& config, DType compute_dtype, DType grad_dtype,
    int64_t unit_alignment = 1,
    config::ActivationCheckpointing checkpointing = config::ActivationCheckpointing::kNone);

}  // namespace mixtrain
