// Why: GPT-2's parameters live in ONE flat buffer so that a trainer, the
// optimizer and ZeRO can own, partition and communicate them as a single
// range. This layout is the map of that buffer: for each parameter, in
// Hugging Face GPT2LMHeadModel order, its HF name, its shape in our layout,
// its offset, and what the initializer, weight decay and the exporter need
// to know about it. The output head is tied to wte and has no entry.
//
// The parameters are grouped into units, the pieces ZeRO reduces,
// partitions and gathers as one flat buffer each: the embeddings (wte,
// wpe), each transformer block, and the final LayerNorm. With a unit
// alignment A > 1 (ZeRO over A ranks) every unit is padded at its end to a
// multiple of A elements, so that each rank owns an equal contiguous slice
// of every unit; the padding elements belong to no parameter and stay zero.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend/tensor.h"
#include "engine/model/gpt_config.h"

namespace mixtrain {

// What a parameter is; decides its initialization and weight decay.
enum class ParameterKind {
  kEmbedding,                 // wte (V,C), wpe (T,C)
  kLinearWeight,              // attn.c_attn.weight, mlp.c_fc.weight
  kResidualProjectionWeight,  // attn.c_proj.weight, mlp.c_proj.weight
  kLinearBias,                // every linear layer's bias
  kLayerNormWeight,
  kLayerNormBias,
};

// The parameters of one transformer block, in HF order.
enum class BlockParameter {
  kLn1Weight,
  kLn1Bias,
  kAttnQkvWeight,   // attn.c_attn.weight (3C,C)
  kAttnQkvBias,     // attn.c_attn.bias (3C)
  kAttnProjWeight,  // attn.c_proj.weight (C,C)
  kAttnProjBias,
  kLn2Weight,
  kLn2Bias,
  kMlpFcWeight,    // mlp.c_fc.weight (4C,C)
  kMlpFcBias,      // mlp.c_fc.bias (4C)
  kMlpProjWeight,  // mlp.c_proj.weight (C,4C)
  kMlpProjBias,
};
inline constexpr int kBlockParameterCount = 12;

struct ParameterInfo {
  std::string name;    // HF name, e.g. "transformer.h.0.attn.c_attn.weight"
  Shape shape;         // our layout: linear weights are (out, in), as llm.c
  int64_t offset = 0;  // first element in the flat buffer
  int64_t numel = 0;   // shape_numel(shape)
  size_t unit = 0;     // index of its unit in ParameterLayout::units()
  ParameterKind kind = ParameterKind::kLinearBias;
  // The HF file stores this weight transposed, (in, out), because GPT-2's
  // Conv1D computes x @ W; true for every linear weight.
  bool transposed_in_hf = false;
  // AdamW weight decay applies: true for 2-D weights (matmul weights and
  // the embeddings), false for biases and LayerNorm parameters.
  bool decay = false;
};

// A run of consecutive parameters stored as one padded flat range.
struct ParameterUnit {
  std::string name;            // "embeddings", "h.<layer>", "ln_f"
  int64_t offset = 0;          // first element in the flat buffer
  int64_t numel = 0;           // elements of its parameters (and wte's padding rows)
  int64_t padded_numel = 0;    // numel rounded up to the alignment: its range's length
  size_t first_parameter = 0;  // its parameters are parameters()[first, end)
  size_t end_parameter = 0;
};

class ParameterLayout {
 public:
  // The layout of a model of `config` (validated here) with every unit
  // padded to a multiple of `unit_alignment` elements. Throws
  // EngineError(kInvalidArgument) naming a bad field, or unit_alignment < 1.
  explicit ParameterLayout(const GptConfig& config, int64_t unit_alignment = 1);

  // Every parameter in buffer order: wte, wpe, the blocks' parameters
  // block by block in BlockParameter order, ln_f weight, ln_f bias. With
  // alignment 1 they tile [0, numel()) without gaps.
  const std::vector<ParameterInfo>& parameters() const { return parameters_; }
  // Elements of the flat buffer, padding (wte's rows and the units') included.
  int64_t numel() const { return numel_; }
  // Elements of the parameters, Psi: V*C + T*C + L*(12*C*C + 13*C) + 2*C.
  int64_t param_count() const { return param_count_; }
  int64_t unit_alignment() const { return unit_alignment_; }

  // The units in buffer order: embeddings, h.0 ... h.<L-1>, ln_f.
  const std::vector<ParameterUnit>& units() const { return units_; }
  static constexpr size_t kEmbeddingsUnit = 0;
  int64_t layers() const { return layers_; }
  size_t block_unit(int64_t layer) const { return static_cast<size_t>(layer) + 1; }
  size_t lnf_unit() const { return units_.size() - 1; }

  const ParameterInfo& wte() const { return parameters_[0]; }
  const ParameterInfo& wpe() const { return parameters_[1]; }
  // wte with its zero padding rows, (Vp, C) at wte's offset: the weight of
  // the tied output GEMM, whose logits are (B*T, Vp). Not in parameters().
  const ParameterInfo& output_head() const { return output_head_; }
  // Parameter `which` of block `layer` (0 <= layer < config.layers).
  const ParameterInfo& block(int64_t layer, BlockParameter which) const;
  const ParameterInfo& lnf_weight() const { return parameters_[parameters_.size() - 2]; }
  const ParameterInfo& lnf_bias() const { return parameters_.back(); }
  // The parameter with HF name `name`; throws EngineError(kInvalidArgument)
  // naming it when there is none.
  const ParameterInfo& find(std::string_view name) const;

 private:
  // Ends the unit begun at parameter `first`: pads the buffer to the alignment.
  void close_unit(std::string name, size_t first);

  std::vector<ParameterInfo> parameters_;
  std::vector<ParameterUnit> units_;
  ParameterInfo output_head_;
  int64_t layers_ = 0;
  int64_t unit_alignment_ = 1;
  int64_t numel_ = 0;
  int64_t param_count_ = 0;
};

// The view of `flat` (numel() elements of any dtype) holding parameter
// `info`, with info.shape. Throws when `flat` is too small.
inline Tensor parameter_view(const Tensor& flat, const ParameterInfo& info) {
  return flat.view(info.offset, info.shape);
}

}  // namespace mixtrain
