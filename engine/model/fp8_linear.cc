// Why: the quantized GEMMs of fp8_linear.h.
#include "engine/model/fp8_linear.h"

#include <algorithm>
#include <cmath>

#include "engine/backend/op_checks.h"

namespace mixtrain {

Fp8Linear::Fp8Linear(Backend& backend, Fp8Recipe& recipe)
    : backend_(backend),
      recipe_(recipe),
      input_scales_(static_cast<size_t>(recipe.gemms()), 1.0f),
      weight_scales_(static_cast<size_t>(recipe.gemms()), 1.0f),
      step_stats_(backend.fp8_stats_tensor(recipe.gemms() * kFp8TensorKinds + 1)),
      slot_scales_(static_cast<size_t>(recipe.gemms() * kFp8TensorKinds), std::nanf("")),
      activation_counts_(static_cast<size_t>(recipe.gemms())) {}

void Fp8Linear::record_step() {
  if (block_scaled()) return;  // recorded as quantized
  const std::vector<Fp8QuantizeStats> stats = backend_.read_fp8_stats(step_stats_);
  for (size_t slot = 0; slot < slot_scales_.size(); ++slot) {
    if (std::isnan(slot_scales_[slot])) continue;  // not quantized this step
    recipe_.record(static_cast<int64_t>(slot) / kFp8TensorKinds,
                   static_cast<Fp8TensorKind>(slot % kFp8TensorKinds), stats[slot],
                   slot_scales_[slot]);
  }
  std::fill(slot_scales_.begin(), slot_scales_.end(), std::nanf(""));
  backend_.set_zero(step_stats_);
}

void Fp8Linear::count_activations(bool on) {
  counting_ = on;
  if (on) std::fill(activation_counts_.begin(), activation_counts_.end(), MagnitudeHistogram{});
}

DType Fp8Linear::codes_dtype(Fp8TensorKind kind) const {
  return recipe_.format(kind) == Fp8Format::kE4M3 ? DType::kFP8E4M3 : DType::kFP8E5M2;
}

bool Fp8Linear::block_scaled() const {
  return recipe_.settings().scaling == config::Fp8Scaling::kMxfp8;
}

float Fp8Linear::scale_for(int64_t gemm, Fp8TensorKind kind, const Tensor& src) {
  if (recipe_.settings().scaling == config::Fp8Scaling::kDelayed) return recipe_.scale(gemm, kind);
  return fp8_scale(backend_.amax(src), recipe_.format(kind),
                   static_cast<int>(recipe_.settings().margin));
}

Fp8Operand Fp8Linear::per_tensor(int64_t gemm, Fp8TensorKind kind, const Tensor& src, float scale,
                                 bool record) {
  const DType dtype = codes_dtype(kind);
  Fp8Operand operand{backend_.empty(src.shape(), dtype, MemoryCategory::kWorkspace), scale};
  const bool recorded = record && recipe_.recording();
  const size_t slot = recorded
                          ? static_cast<size_t>(gemm * kFp8TensorKinds + static_cast<int64_t>(kind))
                          : slot_scales_.size();
  backend_.quantize_fp8_into(operand.codes, src, scale, step_stats_, static_cast<int64_t>(slot));
  if (recorded) slot_scales_[slot] = scale;
  return operand;
}

Fp8Operand Fp8Linear::blocked(int64_t gemm, Fp8TensorKind kind, const Tensor& src, MxAxis axis,
                              bool record) {
  const DType dtype = codes_dtype(kind);
  Fp8Operand operand{backend_.empty(src.shape(), dtype, MemoryCategory::kWorkspace)};
  operand.block_axis = axis;
  operand.block_scales = backend_.empty({mx_scale_count(src.dim(0), src.dim(1), axis)},
                                        DType::kE8M0, MemoryCategory::kWorkspace);
  const int64_t clamped = backend_.mx_quantize(operand.codes, operand.block_scales, src, axis);
  if (record && recipe_.recording()) {
    recipe_.record(gemm, kind, Fp8QuantizeStats{backend_.amax(src), clamped}, std::nanf(""));
  }
  return operand;
}

void Fp8Linear::forward(int64_t gemm, const Tensor& out, const Tensor& in, const Tensor& weight,
                        const Tensor* bias, const Tensor* gelu_out) {
  run_forward(gemm, out, in, weight, bias, gelu_out, /*again=*/false);
}

void Fp8Linear::forward_again(int64_t gemm, const Tensor& out, const Tensor& in,
                              const Tensor& weight, const Tensor* bias, const Tensor* gelu_out) {
  run_forward(gemm, out, in, weight, bias, gelu_out, /*again=*/true);
}

void Fp8Linear::run_forward(int64_t gemm, const Tensor& out, const Tensor& in, const Tensor& weight,
                            const Tensor* bias, const Tensor* gelu_out, bool again) {
  MatmulOptions options;
  options.trans_b = true;
  options.bias = bias;
  options.gelu_out = gelu_out;
  const auto g = static_cast<size_t>(gemm);
  const bool record = !again;
  Fp8Operand input, quantized_weight;
  if (block_scaled()) {
    input = blocked(gemm, Fp8TensorKind::kActivation, in, MxAxis::kAlongRows, record);
    quantized_weight = blocked(gemm, Fp8TensorKind::kWeight, weight, MxAxis::kAlongRows, record);
  } else {
    if (!again) {
      input_scales_[g] = scale_for(gemm, Fp8TensorKind::kActivation, in);
      weight_scales_[g] = scale_for(gemm, Fp8TensorKind::kWeight, weight);
    }
    input = per_tensor(gemm, Fp8TensorKind::kActivation, in, input_scales_[g], record);
    quantized_weight = per_tensor(gemm, Fp8TensorKind::kWeight, weight, weight_scales_[g], record);
  }
  if (counting_ && !again)
    activation_counts_[g].add(backend_.magnitude_histogram({&input.codes, 1}));
  backend_.matmul_fp8(out, input, quantized_weight, options);
}

void Fp8Linear::backward(int64_t gemm, const Tensor& din, const Tensor& dweight,
                         const Tensor* dbias, const Tensor& dout, const Tensor& in,
                         const Tensor& weight) {
  if (dbias != nullptr) backend_.bias_backward(*dbias, dout);
  MatmulOptions accumulate;
  accumulate.trans_a = true;
  accumulate.beta = 1.0f;
  constexpr auto kGrad = Fp8TensorKind::kGradOutput;
  if (block_scaled()) {
    backend_.matmul_fp8(
        din, blocked(gemm, kGrad, dout, MxAxis::kAlongRows, true),
        blocked(gemm, Fp8TensorKind::kWeight, weight, MxAxis::kAlongColumns, false));
    backend_.matmul_fp8(dweight, blocked(gemm, kGrad, dout, MxAxis::kAlongColumns, false),
                        blocked(gemm, Fp8TensorKind::kActivation, in, MxAxis::kAlongColumns, false),
                        accumulate);
    return;
  }
  const auto g = static_cast<size_t>(gemm);
  const Fp8Operand grad = per_tensor(gemm, kGrad, dout, scale_for(gemm, kGrad, dout), true);
  // The forward's scales give the forward's codes again.
  backend_.matmul_fp8(din, grad,
                      per_tensor(gemm, Fp8TensorKind::kWeight, weight, weight_scales_[g], false));
  backend_.matmul_fp8(dweight, grad,
                      per_tensor(gemm, Fp8TensorKind::kActivation, in, input_scales_[g], false),
                      accumulate);
}

}  // namespace mixtrain
