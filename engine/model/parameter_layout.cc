// Why: builds GPT-2's parameter table in Hugging Face order; the only place
// that spells the HF names and our shapes.
#include "engine/model/parameter_layout.h"

#include <string>

#include "engine/common/error.h"

namespace mixtrain {
namespace {

bool is_weight_matrix(ParameterKind kind) {
  return kind == ParameterKind::kEmbedding || kind == ParameterKind::kLinearWeight ||
         kind == ParameterKind::kResidualProjectionWeight;
}

bool is_linear_weight(ParameterKind kind) {
  return kind == ParameterKind::kLinearWeight || kind == ParameterKind::kResidualProjectionWeight;
}

}  // namespace

ParameterLayout::ParameterLayout(const GptConfig& config, int64_t unit_alignment)
    : layers_(config.layers), unit_alignment_(unit_alignment) {
  config.validate();
  MIXTRAIN_CHECK_ARG(
      unit_alignment >= 1,
      "ParameterLayout: unit alignment must be at least 1, got " + std::to_string(unit_alignment));
  const int64_t c = config.dim;
  auto add = [this](std::string name, Shape shape, ParameterKind kind) {
    ParameterInfo info;
    info.name = std::move(name);
    info.numel = shape_numel(shape);
    info.shape = std::move(shape);
    info.offset = numel_;
    info.unit = units_.size();
    info.kind = kind;
    info.transposed_in_hf = is_linear_weight(kind);
    info.decay = is_weight_matrix(kind);
    numel_ += info.numel;
    param_count_ += info.numel;
    parameters_.push_back(std::move(info));
  };
  add("transformer.wte.weight", {config.vocab, c}, ParameterKind::kEmbedding);
  output_head_ = parameters_.back();
  output_head_.shape = {config.padded_vocab(), c};
  output_head_.numel = shape_numel(output_head_.shape);
  numel_ = output_head_.offset + output_head_.numel;
  add("transformer.wpe.weight", {config.seq_len, c}, ParameterKind::kEmbedding);
  close_unit("embeddings", 0);
  for (int64_t layer = 0; layer < config.layers; ++layer) {
    const size_t first = parameters_.size();
    const std::string prefix = "transformer.h." + std::to_string(layer) + ".";
    // Order must follow BlockParameter.
    add(prefix + "ln_1.weight", {c}, ParameterKind::kLayerNormWeight);
    add(prefix + "ln_1.bias", {c}, ParameterKind::kLayerNormBias);
    add(prefix + "attn.c_attn.weight", {3 * c, c}, ParameterKind::kLinearWeight);
    add(prefix + "attn.c_attn.bias", {3 * c}, ParameterKind::kLinearBias);
    add(prefix + "attn.c_proj.weight", {c, c}, ParameterKind::kResidualProjectionWeight);
    add(prefix + "attn.c_proj.bias", {c}, ParameterKind::kLinearBias);
    add(prefix + "ln_2.weight", {c}, ParameterKind::kLayerNormWeight);
    add(prefix + "ln_2.bias", {c}, ParameterKind::kLayerNormBias);
    add(prefix + "mlp.c_fc.weight", {4 * c, c}, ParameterKind::kLinearWeight);
    add(prefix + "mlp.c_fc.bias", {4 * c}, ParameterKind::kLinearBias);
    add(prefix + "mlp.c_proj.weight", {c, 4 * c}, ParameterKind::kResidualProjectionWeight);
    add(prefix + "mlp.c_proj.bias", {c}, ParameterKind::kLinearBias);
    close_unit("h." + std::to_string(layer), first);
  }
  const size_t first = parameters_.size();
  add("transformer.ln_f.weight", {c}, ParameterKind::kLayerNormWeight);
  add("transformer.ln_f.bias", {c}, ParameterKind::kLayerNormBias);
  close_unit("ln_f", first);
}

void ParameterLayout::close_unit(std::string name, size_t first) {
  ParameterUnit unit;
  unit.name = std::move(name);
  unit.offset = parameters_[first].offset;
  unit.numel = numel_ - unit.offset;
  unit.padded_numel = (unit.numel + unit_alignment_ - 1) / unit_alignment_ * unit_alignment_;
  unit.first_parameter = first;
  unit.end_parameter = parameters_.size();
  numel_ = unit.offset + unit.padded_numel;
  units_.push_back(std::move(unit));
}

const ParameterInfo& ParameterLayout::block(int64_t layer, BlockParameter which) const {
  MIXTRAIN_CHECK_ARG(layer >= 0 && layer < layers_, "ParameterLayout::block: layer " +
                                                        std::to_string(layer) + " is outside [0, " +
                                                        std::to_string(layers_) + ")");
  return parameters_[2 + layer * kBlockParameterCount + static_cast<int64_t>(which)];
}

const ParameterInfo& ParameterLayout::find(std::string_view name) const {
  for (const ParameterInfo& info : parameters_) {
    if (info.name == name) return info;
  }
  throw EngineError(ErrorCode::kInvalidArgument,
                    "ParameterLayout: no parameter named \"" + std::string(name) + "\"");
}

}  // namespace mixtrain
