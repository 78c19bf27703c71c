// Why: the HF safetensors file is a contract with transformers and with
// model.init_from: every parameter under its HF name and in HF layout
// (Conv1D weights transposed), values exact in fp32 and rounded as the
// engine rounds in bf16, the hub's own GPT-2 files (names without
// "transformer.") read as well, and a file that does not fit the model
// refused with the file, the tensor and the fitting config key named.
#include "engine/model/hf_safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/checkpoint/safetensors.h"
#include "engine/common/error.h"
#include "engine/model/parameter_layout.h"
#include "model_test_util.h"
#include "engine/numerics/float16.h"

namespace mixtrain::model_test {
namespace {

using ::testing::HasSubstr;

// A fresh path named after the running test and `suffix`.
std::filesystem::path fresh_file(const std::string& suffix) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "_" + info->name() + "_" + suffix;
  for (char& c : name)
    if (c == '/') c = '_';
  const std::filesystem::path path = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove(path);
  return path;
}

// Distinct, not bf16-representable values for every parameter.
std::vector<float> distinct_weights(const GptConfig& config) {
  const ParameterLayout layout(config);
  std::vector<float> out(static_cast<size_t>(layout.numel()));  // wte's padding rows stay zero
  for (const ParameterInfo& info : layout.parameters()) {
    for (int64_t i = info.offset; i < info.offset + info.numel; ++i)
      out[static_cast<size_t>(i)] = 0.001f * static_cast<float>(i) + 1.0f / 3.0f;
  }
  return out;
}

// The message of the EngineError(kInvalidArgument) that importing `file`
// as `config` throws.
std::string import_error(const std::filesystem::path& file, const GptConfig& config) {
  try {
    import_hf_safetensors(file, config);
  } catch (const EngineError& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    return error.what();
  }
  ADD_FAILURE() << "import of " << file << " succeeded";
  return "";
}

// Writes the fp32 tensors `tensors` (name, HF shape; zero-filled) to `file`.
void write_zeros(const std::filesystem::path& file,
                 const std::vector<std::pair<std::string, Shape>>& tensors) {
  std::vector<std::vector<float>> storage;
  std::vector<HostTensor> host;
  for (const auto& [name, shape] : tensors) {
    storage.emplace_back(static_cast<size_t>(shape_numel(shape)));
    host.push_back(HostTensor{TensorLayout{name, DType::kF32, shape}, storage.back().data()});
  }
  write_safetensors(file, host);
}

// `name` as the hub's GPT-2 files spell it: "h.0.ln_1.weight" for
// "transformer.h.0.ln_1.weight".
std::string hub_name(const std::string& name) {
  constexpr std::string_view kPrefix = "transformer.";
  return name.starts_with(kPrefix) ? name.substr(kPrefix.size()) : name;
}

// Every parameter of `config` in HF layout, plus `extra`, minus `skip`.
std::vector<std::pair<std::string, Shape>> hf_tensors(
    const GptConfig& config, const std::vector<std::pair<std::string, Shape>>& extra = {},
    const std::string& skip = "") {
  std::vector<std::pair<std::string, Shape>> out;
  const ParameterLayout layout(config);
  for (const ParameterInfo& info : layout.parameters()) {
    if (info.name == skip) continue;
    out.emplace_back(info.name,
                     info.transposed_in_hf ? Shape{info.shape[1], info.shape[0]} : info.shape);
  }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

// `tensors` renamed as the hub's GPT-2 files name them, without the
// "transformer." prefix.
std::vector<std::pair<std::string, Shape>> hub_named(
    std::vector<std::pair<std::string, Shape>> tensors) {
  for (auto& [name, shape] : tensors) name = hub_name(name);
  return tensors;
}

// Imports `file` and expects exactly the bits of `weights`.
void expect_imports_exactly(const std::filesystem::path& file, const GptConfig& config,
                            const std::vector<float>& weights) {
  const std::vector<float> back = import_hf_safetensors(file, config);
  ASSERT_EQ(back.size(), weights.size());
  EXPECT_EQ(std::memcmp(back.data(), weights.data(), weights.size() * sizeof(float)), 0);
}

TEST(HfSafetensorsTest, Fp32RoundTripIsExact) {
  const GptConfig config = tiny_config();
  const std::vector<float> weights = distinct_weights(config);
  const std::filesystem::path file = fresh_file("model.safetensors");
  export_hf_safetensors(file, config, weights, DType::kF32);
  expect_imports_exactly(file, config, weights);
}

TEST(HfSafetensorsTest, FileHoldsHfNamesShapesAndMetadataWithoutLmHead) {
  const GptConfig config = tiny_config();
  const std::filesystem::path file = fresh_file("model.safetensors");
  export_hf_safetensors(file, config, distinct_weights(config), DType::kF32);
  const SafetensorsFile input = SafetensorsFile::open(file);
  EXPECT_EQ(input.metadata().at("format"), "pt");
  EXPECT_EQ(input.metadata().at(kHfConfigMetadataKey), "2,2,8,4,11");
  EXPECT_EQ(input.find("lm_head.weight"), nullptr);
  const ParameterLayout layout(config);
  ASSERT_EQ(input.tensors().size(), layout.parameters().size());
  const SafetensorsEntry* fc = input.find("transformer.h.1.mlp.c_fc.weight");
  ASSERT_NE(fc, nullptr);
  EXPECT_EQ(fc->layout.shape, (Shape{8, 32}));  // HF Conv1D: (in, out)
  EXPECT_EQ(input.find("transformer.wte.weight")->layout.shape, (Shape{11, 8}));
}

TEST(HfSafetensorsTest, Conv1DWeightsAreStoredTransposed) {
  const GptConfig config = tiny_config();
  const std::vector<float> weights = distinct_weights(config);
  const std::filesystem::path file = fresh_file("model.safetensors");
  export_hf_safetensors(file, config, weights, DType::kF32);
  const SafetensorsFile input = SafetensorsFile::open(file);
  const ParameterLayout layout(config);
  const ParameterInfo& info = layout.block(0, BlockParameter::kAttnQkvWeight);
  // Ours (out=24, in=8): element (out 5, in 3). HF (in=8, out=24): (3, 5).
  const int64_t ours = info.offset + 5 * 8 + 3;
  float stored = 0.0f;
  std::memcpy(&stored, input.bytes(info.name).data() + (3 * 24 + 5) * sizeof(float), sizeof(float));
  EXPECT_EQ(stored, weights[static_cast<size_t>(ours)]);
}

TEST(HfSafetensorsTest, Bf16ExportRoundsAsTheEngineDoes) {
  const GptConfig config = tiny_config();
  const std::vector<float> weights = distinct_weights(config);
  const std::filesystem::path file = fresh_file("model.safetensors");
  export_hf_safetensors(file, config, weights, DType::kBF16);
  const SafetensorsFile input = SafetensorsFile::open(file);
  const ParameterLayout layout(config);
  const ParameterInfo& wte = layout.wte();
  const SafetensorsEntry* entry = input.find(wte.name);
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->layout.dtype, DType::kBF16);
  const std::span<const std::byte> bytes = input.bytes(*entry);
  for (int64_t i = 0; i < wte.numel; ++i) {
    uint16_t bits = 0;
    std::memcpy(&bits, bytes.data() + i * 2, 2);
    ASSERT_EQ(bits, float_to_bf16_bits(weights[static_cast<size_t>(wte.offset + i)])) << i;
  }
  const std::vector<float> back = import_hf_safetensors(file, config);
  for (size_t i = 0; i < weights.size(); ++i)
    ASSERT_EQ(back[i], bf16_bits_to_float(float_to_bf16_bits(weights[i]))) << i;
}

TEST(HfSafetensorsTest, IgnoresHfAttentionBuffersAndTiedHead) {
  const GptConfig config = tiny_config();
  const std::filesystem::path file = fresh_file("hf.safetensors");
  write_zeros(file, hf_tensors(config, {{"transformer.h.0.attn.bias", {1, 1, 4, 4}},
                                        {"transformer.h.1.attn.masked_bias", {}},
                                        {"lm_head.weight", {11, 8}}}));
  EXPECT_EQ(import_hf_safetensors(file, config).size(),
            static_cast<size_t>(ParameterLayout(config).numel()));
}

TEST(HfSafetensorsTest, ImportsHubFilesWithoutTheTransformerPrefix) {
  const GptConfig config = tiny_config();
  const std::vector<float> weights = distinct_weights(config);
  const std::filesystem::path exported = fresh_file("model.safetensors");
  export_hf_safetensors(exported, config, weights, DType::kF32);
  // The exported tensors under the hub's names, with its attention buffers.
  const SafetensorsFile input = SafetensorsFile::open(exported);
  std::vector<HostTensor> hub;
  for (const SafetensorsEntry& entry : input.tensors()) {
    hub.push_back(HostTensor{
        TensorLayout{hub_name(entry.layout.name), entry.layout.dtype, entry.layout.shape},
        input.bytes(entry).data()});
  }
  const std::vector<float> mask(16, 1.0f);
  const float masked_bias = -1e4f;
  hub.push_back(HostTensor{TensorLayout{"h.0.attn.bias", DType::kF32, {1, 1, 4, 4}}, mask.data()});
  hub.push_back(HostTensor{TensorLayout{"h.1.attn.masked_bias", DType::kF32, {}}, &masked_bias});
  const std::filesystem::path file = fresh_file("hub.safetensors");
  write_safetensors(file, hub);

  expect_imports_exactly(file, config, weights);
}

TEST(HfSafetensorsTest, NamesAMissingTensorAsAHubFileDoes) {
  const GptConfig config = tiny_config();
  const std::filesystem::path file = fresh_file("hub_missing.safetensors");
  write_zeros(file, hub_named(hf_tensors(config, {}, "transformer.h.1.ln_2.bias")));
  EXPECT_THAT(import_error(file, config), HasSubstr("\"h.1.ln_2.bias\" is missing"));
}

TEST(HfSafetensorsTest, RefusesAFileMixingBothNamingConventions) {
  const GptConfig config = tiny_config();
  const std::filesystem::path file = fresh_file("mixed.safetensors");
  write_zeros(file, hf_tensors(config, {{"ln_f.bias", {8}}}, "transformer.ln_f.bias"));
  const std::string message = import_error(file, config);
  EXPECT_THAT(message, HasSubstr(file.string()));
  EXPECT_THAT(message, HasSubstr("mixes tensor names with the \"transformer.\" prefix"));
  EXPECT_THAT(message, HasSubstr("\"transformer.wte.weight\""));
  EXPECT_THAT(message, HasSubstr("\"ln_f.bias\""));
}

TEST(HfSafetensorsTest, RefusesAMissingTensorNamingFileAndTensor) {
  const GptConfig config = tiny_config();
  const std::filesystem::path file = fresh_file("missing.safetensors");
  write_zeros(file, hf_tensors(config, {}, "transformer.h.1.ln_2.bias"));
  const std::string message = import_error(file, config);
  EXPECT_THAT(message, HasSubstr(file.string()));
  EXPECT_THAT(message, HasSubstr("\"transformer.h.1.ln_2.bias\" is missing"));
}

TEST(HfSafetensorsTest, RefusesAWrongShapeNamingTheFittingKey) {
  const GptConfig config = tiny_config();
  const std::filesystem::path file = fresh_file("shape.safetensors");
  GptConfig other = config;
  other.vocab = 50;
  write_zeros(file, hf_tensors(other));
  std::string message = import_error(file, config);
  EXPECT_THAT(message, HasSubstr("\"transformer.wte.weight\" has shape"));
  EXPECT_THAT(message, HasSubstr("model.vocab=50 would fit"));

  const std::filesystem::path wide = fresh_file("wide.safetensors");
  other = config;
  other.dim = 16;
  write_zeros(wide, hf_tensors(other));
  message = import_error(wide, config);
  EXPECT_THAT(message, HasSubstr(wide.string()));
  EXPECT_THAT(message, HasSubstr("model.dim=16 would fit"));
}

TEST(HfSafetensorsTest, RefusesUnknownAndSurplusTensors) {
  const GptConfig config = tiny_config();
  const std::filesystem::path file = fresh_file("extra.safetensors");
  write_zeros(file, hf_tensors(config, {{"transformer.h.0.attn.rotary", {4}}}));
  EXPECT_THAT(import_error(file, config),
              HasSubstr("\"transformer.h.0.attn.rotary\" is not a parameter"));

  const std::filesystem::path deeper = fresh_file("deeper.safetensors");
  GptConfig other = config;
  other.layers = 3;
  write_zeros(deeper, hf_tensors(other));
  EXPECT_THAT(import_error(deeper, config), HasSubstr("model.layers=2"));
}

}  // namespace
}  // namespace mixtrain::model_test
