// Why: implementation of the Hugging Face GPT-2 safetensors export and
// import (see hf_safetensors.h).
#include "engine/model/hf_safetensors.h"

#include <cstddef>
#include <string>
#include <string_view>

#include "engine/checkpoint/file_io.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/common/contained_open.h"
#include "engine/common/error.h"
#include "engine/model/parameter_layout.h"
#include "engine/numerics/convert.h"

namespace mixtrain {
namespace {

// The shape `info` has in an HF file.
Shape hf_shape(const ParameterInfo& info) {
  return info.transposed_in_hf ? Shape{info.shape[1], info.shape[0]} : info.shape;
}

// Writes the (rows, cols) row-major matrix `src` transposed into `dst`.
void transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
}

// Every parameter of ours is "transformer.<rest>", as GPT2LMHeadModel names
// it; the hub's own GPT-2 files (saved from GPT2Model) name it "<rest>".
constexpr std::string_view kTransformerPrefix = "transformer.";

// `name` without a leading "transformer.".
std::string_view unprefixed(std::string_view name) {
  if (name.starts_with(kTransformerPrefix)) name.remove_prefix(kTransformerPrefix.size());
  return name;
}

// HF buffers and tied weights that are not parameters of ours, named with
// or without the "transformer." prefix.
bool is_ignored_hf_tensor(std::string_view name) {
  if (name == "lm_head.weight") return true;
  name = unprefixed(name);
  if (!name.starts_with("h.")) return false;
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

// The block index of "[transformer.]h.N.<rest>", or -1 for any other name.
int64_t block_index(std::string_view name) {
  name = unprefixed(name);
  constexpr std::string_view prefix = "h.";
  if (!name.starts_with(prefix)) return -1;
  name.remove_prefix(prefix.size());
  int64_t index = 0;
  size_t digits = 0;
  while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') {
    index = index * 10 + (name[digits] - '0');
    ++digits;
  }
  return digits > 0 && digits < name.size() && name[digits] == '.' ? index : -1;
}

// Whether `name` is a GPT-2 transformer tensor named without the prefix,
// as in the hub's files ("wte.weight", "h.0.ln_1.bias", "ln_f.weight", ...).
bool is_bare_transformer_name(std::string_view name) {
  for (const std::string_view root : {"wte.", "wpe.", "h.", "ln_f."})
    if (name.starts_with(root)) return true;
  return false;
}

// Whether `input` names the transformer's tensors with the "transformer."
// prefix (GPT2LMHeadModel, our export) rather than without (the hub's GPT-2
// files); a file with neither counts as prefixed. Throws
// EngineError(kInvalidArgument) naming the file and one tensor of each kind
// for a file that mixes both.
bool has_transformer_prefix(const SafetensorsFile& input) {
  const std::string* prefixed = nullptr;
  const std::string* bare = nullptr;
  for (const SafetensorsEntry& entry : input.tensors()) {
    const std::string& name = entry.layout.name;
    if (name.starts_with(kTransformerPrefix) && prefixed == nullptr) prefixed = &name;
    if (is_bare_transformer_name(name) && bare == nullptr) bare = &name;
  }
  if (prefixed != nullptr && bare != nullptr) {
    throw EngineError(ErrorCode::kInvalidArgument,
                      "safetensors " + input.path().string() +
                          ": mixes tensor names with the \"transformer.\" prefix (\"" + *prefixed +
                          "\") and without it (\"" + *bare +
                          "\"); a GPT-2 file uses one convention");
  }
  return bare == nullptr;
}

// Which config key, set to which value, would give `info` the HF shape
// `got` (same rank as its expected shape); empty when none would.
std::string fitting_key(const ParameterInfo& info, const Shape& got, const GptConfig& config) {
  const Shape expected = hf_shape(info);
  const bool is_wte = info.name == "transformer.wte.weight";
  const bool is_wpe = info.name == "transformer.wpe.weight";
  for (size_t axis = 0; axis < expected.size(); ++axis) {
    if (got[axis] == expected[axis]) continue;
    if (axis == 0 && is_wte) return "model.vocab=" + std::to_string(got[axis]);
    if (axis == 0 && is_wpe) return "model.seq_len=" + std::to_string(got[axis]);
    // Every other dimension is a multiple of dim (1, 3 or 4 times).
    const int64_t factor = expected[axis] / config.dim;
    if (got[axis] % factor != 0) return "";
    return "model.dim=" + std::to_string(got[axis] / factor);
  }
  return "";
}

// Throws EngineError(kInvalidArgument) "safetensors FILE: tensor "T" PROBLEM".
[[noreturn]] void refuse_tensor(const std::filesystem::path& file, const std::string& tensor,
                                const std::string& problem) {
  throw EngineError(ErrorCode::kInvalidArgument,
                    "safetensors " + file.string() + ": tensor \"" + tensor + "\" " + problem);
}

}  // namespace

std::string hf_config_metadata(const GptConfig& config) {
  return std::to_string(config.layers) + "," + std::to_string(config.heads) + "," +
         std::to_string(config.dim) + "," + std::to_string(config.seq_len) + "," +
         std::to_string(config.vocab);
}

void export_hf_safetensors(const std::filesystem::path& file, const GptConfig& config,
                           const HfParameterSource& source, DType dtype) {
  MIXTRAIN_CHECK_ARG(is_float_compute(dtype), "export " + file.string() + ": dtype " +
                                                  dtype_name(dtype) +
                                                  " is not one of fp32, fp16, bf16");
  const ParameterLayout layout(config);
  std::vector<TensorLayout> tensors;
  for (const ParameterInfo& info : layout.parameters())
    tensors.push_back(TensorLayout{info.name, dtype, hf_shape(info)});
  const SafetensorsMetadata metadata{{"format", "pt"},
                                     {kHfConfigMetadataKey, hf_config_metadata(config)}};

  FileWriter out(file);
  try {
    SafetensorsWriter writer(out, std::move(tensors), metadata);
    std::vector<float> transposed;
    std::vector<std::byte> converted;
    for (const ParameterInfo& info : layout.parameters()) {
      const std::vector<float> values = source(info);
      MIXTRAIN_CHECK_ARG(static_cast<int64_t>(values.size()) == info.numel,
                         "export " + file.string() + ": " + info.name + " got " +
                             std::to_string(values.size()) + " values, it has " +
                             std::to_string(info.numel));
      const float* hf_values = values.data();
      if (info.transposed_in_hf) {
        transposed.resize(static_cast<size_t>(info.numel));
        transpose(values.data(), info.shape[0], info.shape[1], transposed.data());
        hf_values = transposed.data();
      }
      converted.resize(static_cast<size_t>(info.numel) * dtype_size(dtype));
      convert(hf_values, DType::kF32, converted.data(), dtype, static_cast<size_t>(info.numel));
      writer.write_next(converted);
    }
    writer.finish();
    out.sync_and_close();
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(file, ignored);  // a partial file is no export
    throw;
  }
}

void export_hf_safetensors(const std::filesystem::path& file, const GptConfig& config,
                           std::span<const float> master, DType dtype) {
  const ParameterLayout layout(config);
  MIXTRAIN_CHECK_ARG(static_cast<int64_t>(master.size()) == layout.numel(),
                     "export " + file.string() + ": " + std::to_string(master.size()) +
                         " master weights, the model has " + std::to_string(layout.numel()));
  const auto slice = [master](const ParameterInfo& info) {
    const auto values =
        master.subspan(static_cast<size_t>(info.offset), static_cast<size_t>(info.numel));
    return std::vector<float>(values.begin(), values.end());
  };
  export_hf_safetensors(file, config, slice, dtype);
}

std::vector<float> import_hf_safetensors(const std::filesystem::path& file,
                                         const GptConfig& expected,
                                         const std::optional<std::filesystem::path>& data_root) {
  const ParameterLayout layout(expected);
  const SafetensorsFile input(MappedFile(file, open_input_file(file, data_root)));
  const bool prefixed = has_transformer_prefix(input);
  // The name that our parameter `info` has in the file.
  const auto name_in_file = [prefixed](const ParameterInfo& info) {
    return prefixed ? std::string_view(info.name) : unprefixed(info.name);
  };

  for (const SafetensorsEntry& entry : input.tensors()) {
    const std::string& name = entry.layout.name;
    if (is_ignored_hf_tensor(name)) continue;
    if (const int64_t block = block_index(name); block >= expected.layers) {
      refuse_tensor(file, name,
                    "is not a parameter of the model: the file has more blocks than "
                    "model.layers=" +
                        std::to_string(expected.layers));
    }
    bool known = false;
    for (const ParameterInfo& info : layout.parameters())
      known = known || name_in_file(info) == name;
    if (!known) refuse_tensor(file, name, "is not a parameter of a GPT-2 (GPT2LMHeadModel)");
  }

  std::vector<float> master(static_cast<size_t>(layout.numel()));
  std::vector<float> staged;
  for (const ParameterInfo& info : layout.parameters()) {
    const std::string tensor(name_in_file(info));
    const SafetensorsEntry* entry = input.find(tensor);
    if (entry == nullptr) {
      refuse_tensor(file, tensor,
                    block_index(info.name) >= 0
                        ? "is missing: the file has fewer blocks than model.layers=" +
                              std::to_string(expected.layers)
                        : std::string("is missing"));
    }
    const Shape want = hf_shape(info);
    const Shape& got = entry->layout.shape;
    if (got != want) {
      std::string problem =
          "has shape " + shape_string(got) + ", the model expects " + shape_string(want);
      const std::string key = got.size() == want.size() ? fitting_key(info, got, expected) : "";
      if (!key.empty()) problem += "; " + key + " would fit it";
      refuse_tensor(file, tensor, problem);
    }
    const DType dtype = entry->layout.dtype;
    if (!is_float_compute(dtype)) {
      refuse_tensor(
          file, tensor,
          std::string("has dtype ") + dtype_name(dtype) + ", not one of fp32, fp16, bf16");
    }
    float* destination = master.data() + info.offset;
    float* target = destination;
    if (info.transposed_in_hf) {
      staged.resize(static_cast<size_t>(info.numel));
      target = staged.data();
    }
    convert(input.bytes(*entry).data(), dtype, target, DType::kF32,
            static_cast<size_t>(info.numel));
    if (info.transposed_in_hf) transpose(target, want[0], want[1], destination);
  }
  return master;
}

}  // namespace mixtrain
