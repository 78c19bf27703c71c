// Why: weights leave mixtrain (`mixtrain export`) as a Hugging Face
// GPT2LMHeadModel safetensors file, so that transformers, and any tool that
// reads HF GPT-2, can use them, and enter it (model.init_from) from such a
// file or from the hub's own GPT-2 files. This is the one place that maps
// our flat (out, in) buffer to HF's names and layout (Conv1D weights stored
// (in, out)) and back.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/model/gpt_config.h"
#include "engine/model/parameter_layout.h"
#include "engine/numerics/dtype.h"

namespace mixtrain {

// Metadata key whose value is "<layers>,<heads>,<dim>,<seq_len>,<vocab>".
inline constexpr const char* kHfConfigMetadataKey = "mixtrain_config";

// The value of kHfConfigMetadataKey for `config`.
std::string hf_config_metadata(const GptConfig& config);

// The fp32 values of parameter `info` in our layout (info.numel of them).
using HfParameterSource = std::function<std::vector<float>(const ParameterInfo& info)>;

// Writes the parameters of a model of `config`, each asked of `source` in
// ParameterLayout(config) order, to the new file `file` as GPT2LMHeadModel
// tensors in HF layout, converted to `dtype` (fp32, fp16 or bf16, rounded
// to nearest even as numerics/convert.h does). lm_head.weight is left out:
// HF ties it to wte and its own files omit it. Metadata: {"format": "pt",
// "mixtrain_config": ...}. Parameters are asked for, converted and written
// one at a time, so at most one is held. Throws EngineError
// (kInvalidArgument) for a bad config, another dtype or a source value of
// the wrong size, EngineError naming the file on an I/O error (the file must
// not exist), and whatever `source` throws; no file is left then.
void export_hf_safetensors(const std::filesystem::path& file, const GptConfig& config,
                           const HfParameterSource& source, DType dtype);

// The same for `master`, ParameterLayout(config).numel() fp32 values in
// layout order; throws EngineError(kInvalidArgument) for another size.
void export_hf_safetensors(const std::filesystem::path& file, const GptConfig& config,
                           std::span<const float> master, DType dtype);

// Reads the GPT-2 safetensors file `file` (fp32, fp16 or bf16 tensors)
// into a flat fp32 buffer in ParameterLayout(expected) order, transposing
// Conv1D weights back to (out, in). Tensor names may follow either HF
// convention, GPT2LMHeadModel's ("transformer.wte.weight",
// "transformer.h.0.attn.c_attn.weight", ...; our export) or that of the
// hub's own GPT-2 files, saved from GPT2Model without the "transformer."
// prefix ("wte.weight", "h.0.attn.c_attn.weight", ...), but not both. HF's
// attention buffers ("[transformer.]h.N.attn.bias", "...attn.masked_bias")
// and the tied "lm_head.weight" are ignored. Throws
// EngineError(kInvalidArgument) naming the file for a file mixing both
// conventions, and naming the file and the tensor (as the file names it)
// for a missing tensor, a tensor of another shape or dtype (naming the
// config key whose value would fit), or an unknown extra tensor; and as
// SafetensorsFile::open for an unreadable file. The file is opened with
// open_input_file beneath `data_root` when one is given, and refused
// (naming it) when it lies outside (common/contained_open.h).
std::vector<float> import_hf_safetensors(
    const std::filesystem::path& file, const GptConfig& expected,
    const std::optional<std::filesystem::path>& data_root = std::nullopt);

}  // namespace mixtrain
