// Why: the linear layers of compute fp8 (precision.compute: fp8). Their
// GEMMs take fp8 inputs, scaled as the recipe says, and accumulate in fp32
// with bf16 outputs; everything around them stays bf16. One object runs
// every quantized GEMM of the model, numbered by the model, and keeps
// the scales the forward used so the backward quantizes the same values:
//
//   forward   out = Q(in) Q(W)^T + b             E4M3 (forward format)
//   backward  din = Q(dout) Q(W)                  dout in the backward format
//             dW += Q(dout)^T Q(in), db += colsum(dout)  (unquantized dout)
//
// Per-tensor recipes (delayed, current) quantize each operand once per
// use with one scale, the figures (amax, saturations) gathered on the
// device in one slot per (GEMM, kind) and handed to the recipe once per
// step (record_step), so no quantization waits for the device; mxfp8
// blocks each operand along the GEMM's reduction dimension, so the
// backward re-blocks the weight, the input and the output gradient along
// the other axis. On the telemetry's steps each
// forward's quantized input is also counted by its fp8 values (where they
// lie in the format's range: the scale's work made visible).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/amp/fp8_recipe.h"
#include "engine/backend/backend.h"

namespace mixtrain {

class Fp8Linear {
 public:
  // `recipe` (its gemms() numbering the GEMMs) must outlive this object.
  Fp8Linear(Backend& backend, Fp8Recipe& recipe);

  // out (N,O) = in (N,K) W^T (W (O,K)) + bias, and gelu_out = GELU(out)
  // when given, as Backend::matmul's options.
  void forward(int64_t gemm, const Tensor& out, const Tensor& in, const Tensor& weight,
               const Tensor* bias, const Tensor* gelu_out);
  // The forward of `gemm` once more on the same input (activation
  // checkpointing's recompute): quantized with the scales its forward
  // used, so the codes are the forward's, and nothing recorded or counted.
  void forward_again(int64_t gemm, const Tensor& out, const Tensor& in, const Tensor& weight,
                     const Tensor* bias, const Tensor* gelu_out);
  // din (N,K) = dout W (overwritten); dweight (O,K) += dout^T in; dbias
  // (O) += column sums of dout when given. Needs the forward of `gemm`.
  void backward(int64_t gemm, const Tensor& din, const Tensor& dweight, const Tensor* dbias,
                const Tensor& dout, const Tensor& in, const Tensor& weight);

  Fp8Recipe& recipe() { return recipe_; }

  // Hands the recipe what this step's per-tensor quantizations gathered
  // (one read from the device) and starts the next step's gathering; call
  // before the recipe's end_step.
  void record_step();

  // While on, each forward counts its quantized input's codes into
  // activation_counts()[gemm]; turning it on clears the counts.
  void count_activations(bool on);
  // One histogram per GEMM (recipe().gemms()): the fp8 values of the
  // inputs quantized since counting was turned on.
  const std::vector<MagnitudeHistogram>& activation_counts() const { return activation_counts_; }

 private:
  // The per-tensor scale to quantize `src` of (gemm, kind) with: the
  // recipe's (delayed) or from src's own amax (current).
  float scale_for(int64_t gemm, Fp8TensorKind kind, const Tensor& src);
  // src quantized per tensor with `scale`; recorded when `record`.
  Fp8Operand per_tensor(int64_t gemm, Fp8TensorKind kind, const Tensor& src, float scale,
                        bool record);
  // src (2-D) quantized in MX blocks along `axis`; recorded when `record`.
  Fp8Operand blocked(int64_t gemm, Fp8TensorKind kind, const Tensor& src, MxAxis axis, bool record);
  bool block_scaled() const;
  // forward (again: forward_again).
  void run_forward(int64_t gemm, const Tensor& out, const Tensor& in, const Tensor& weight,
                   const Tensor* bias, const Tensor* gelu_out, bool again);
  // The dtype of the codes of tensors of `kind` (the recipe's format).
  DType codes_dtype(Fp8TensorKind kind) const;

  Backend& backend_;
  Fp8Recipe& recipe_;
  // The scales each GEMM's forward used for its input and weight.
  std::vector<float> input_scales_;
  std::vector<float> weight_scales_;
  // Per-tensor figures of this step, slot (gemm, kind) gemm-major, and a
  // last slot for quantizations that are not recorded; the scale each
  // slot last used.
  Tensor step_stats_;
  std::vector<float> slot_scales_;
  bool counting_ = false;
  std::vector<MagnitudeHistogram> activation_counts_;
};

}  // namespace mixtrain
