// Why: the flat-buffer layout is a contract with the optimizer, ZeRO and
// the safetensors exporter: names, shapes, offsets, flags and the total
// count must be exactly GPT-2's. Also GptConfig's validation messages.
#include "engine/model/parameter_layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "engine/common/error.h"
#include "model_test_util.h"

namespace mixtrain::model_test {
namespace {

using ::testing::HasSubstr;

int64_t formula_count(const GptConfig& c) {
  return c.vocab * c.dim + c.seq_len * c.dim + c.layers * (12 * c.dim * c.dim + 13 * c.dim) +
         2 * c.dim;
}

TEST(ParameterLayoutTest, ExampleConfigCountMatchesGpt2Formula) {
  const GptConfig config = example_config();
  const ParameterLayout layout(config);
  EXPECT_EQ(layout.numel(), formula_count(config));
  EXPECT_EQ(layout.numel(), 10844160);  // llm.c / HF count with the tied head
  EXPECT_EQ(layout.parameters().size(), 2u + 6u * kBlockParameterCount + 2u);
}

TEST(ParameterLayoutTest, ParametersTileTheBufferInOrder) {
  const ParameterLayout layout(example_config());
  int64_t next = 0;
  for (const ParameterInfo& p : layout.parameters()) {
    EXPECT_EQ(p.offset, next) << p.name;
    EXPECT_EQ(p.numel, shape_numel(p.shape)) << p.name;
    next += p.numel;
  }
  EXPECT_EQ(next, layout.numel());
}

TEST(ParameterLayoutTest, NamesShapesAndFlagsOfEveryKind) {
  const ParameterLayout layout(example_config());
  const auto expect = [&](const std::string& name, const Shape& shape, bool transposed,
                          bool decay) {
    const ParameterInfo& p = layout.find(name);
    EXPECT_EQ(p.shape, shape) << name;
    EXPECT_EQ(p.transposed_in_hf, transposed) << name;
    EXPECT_EQ(p.decay, decay) << name;
  };
  expect("transformer.wte.weight", {256, 384}, false, true);
  expect("transformer.wpe.weight", {256, 384}, false, true);
  expect("transformer.h.0.ln_1.weight", {384}, false, false);
  expect("transformer.h.0.ln_1.bias", {384}, false, false);
  expect("transformer.h.3.attn.c_attn.weight", {1152, 384}, true, true);
  expect("transformer.h.3.attn.c_attn.bias", {1152}, false, false);
  expect("transformer.h.5.attn.c_proj.weight", {384, 384}, true, true);
  expect("transformer.h.5.attn.c_proj.bias", {384}, false, false);
  expect("transformer.h.2.ln_2.weight", {384}, false, false);
  expect("transformer.h.2.ln_2.bias", {384}, false, false);
  expect("transformer.h.1.mlp.c_fc.weight", {1536, 384}, true, true);
  expect("transformer.h.1.mlp.c_fc.bias", {1536}, false, false);
  expect("transformer.h.4.mlp.c_proj.weight", {384, 1536}, true, true);
  expect("transformer.h.4.mlp.c_proj.bias", {384}, false, false);
  expect("transformer.ln_f.weight", {384}, false, false);
  expect("transformer.ln_f.bias", {384}, false, false);
}

TEST(ParameterLayoutTest, OffsetsOfTheFirstBlockAndTheEnd) {
  const ParameterLayout layout(example_config());
  const int64_t c = 384, embeddings = 2 * 256 * c;
  EXPECT_EQ(layout.wpe().offset, 256 * c);
  EXPECT_EQ(layout.block(0, BlockParameter::kLn1Weight).offset, embeddings);
  EXPECT_EQ(layout.block(0, BlockParameter::kAttnQkvWeight).offset, embeddings + 2 * c);
  EXPECT_EQ(layout.block(0, BlockParameter::kAttnQkvBias).offset, embeddings + 2 * c + 3 * c * c);
  EXPECT_EQ(layout.block(1, BlockParameter::kLn1Weight).offset, embeddings + 12 * c * c + 13 * c);
  EXPECT_EQ(layout.lnf_weight().offset, layout.numel() - 2 * c);
  EXPECT_EQ(layout.lnf_bias().offset, layout.numel() - c);
  EXPECT_EQ(layout.block(5, BlockParameter::kMlpProjBias).name, "transformer.h.5.mlp.c_proj.bias");
}

TEST(ParameterLayoutTest, UnknownNameAndLayerThrow) {
  const ParameterLayout layout(tiny_config());
  EXPECT_THROW(layout.find("transformer.h.9.ln_1.weight"), EngineError);
  EXPECT_THROW(layout.block(2, BlockParameter::kLn1Weight), EngineError);
  EXPECT_THROW(layout.block(-1, BlockParameter::kLn1Weight), EngineError);
}

// The message of the EngineError that validate() throws, or "" if none.
std::string validation_error(const GptConfig& config) {
  try {
    config.validate();
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(ParameterLayoutTest, UnitsAreEmbeddingsBlocksAndLnfTilingTheBuffer) {
  const ParameterLayout layout(tiny_config());  // L=2, C=8, T=4, V=11
  const std::vector<ParameterUnit>& units = layout.units();
  ASSERT_EQ(units.size(), 4u);
  EXPECT_EQ(units[ParameterLayout::kEmbeddingsUnit].name, "embeddings");
  EXPECT_EQ(units[layout.block_unit(1)].name, "h.1");
  EXPECT_EQ(units[layout.lnf_unit()].name, "ln_f");
  EXPECT_EQ(units[0].numel, (64 + 4) * 8);  // wte's rows padded to 64
  EXPECT_EQ(units[1].numel, 12 * 8 * 8 + 13 * 8);
  EXPECT_EQ(units[3].numel, 2 * 8);
  int64_t next = 0;
  size_t next_parameter = 0;
  for (const ParameterUnit& unit : units) {
    EXPECT_EQ(unit.offset, next) << unit.name;
    EXPECT_EQ(unit.padded_numel, unit.numel) << "alignment 1 pads nothing";
    EXPECT_EQ(unit.first_parameter, next_parameter) << unit.name;
    next += unit.padded_numel;
    next_parameter = unit.end_parameter;
  }
  EXPECT_EQ(next, layout.numel());
  EXPECT_EQ(layout.numel(), layout.param_count() + (64 - 11) * 8);
  EXPECT_EQ(next_parameter, layout.parameters().size());
}

TEST(ParameterLayoutTest, AlignmentPadsEachUnitToAMultipleWithAtMostAlignmentMinusOne) {
  const ParameterLayout plain(tiny_config());
  for (int64_t alignment : {2, 3, 4, 7}) {
    const ParameterLayout layout(tiny_config(), alignment);
    EXPECT_EQ(layout.param_count(), plain.param_count());
    int64_t padding = 0;
    for (size_t u = 0; u < layout.units().size(); ++u) {
      const ParameterUnit& unit = layout.units()[u];
      EXPECT_EQ(unit.padded_numel % alignment, 0) << unit.name;
      EXPECT_LT(unit.padded_numel - unit.numel, alignment) << unit.name;
      EXPECT_EQ(unit.numel, plain.units()[u].numel) << unit.name;
      padding += unit.padded_numel - unit.numel;
      // Parameters keep their order and stay contiguous within the unit.
      EXPECT_EQ(layout.parameters()[unit.first_parameter].offset, unit.offset);
    }
    EXPECT_EQ(layout.numel(), layout.param_count() + (64 - 11) * 8 + padding);
  }
  EXPECT_THROW(ParameterLayout(tiny_config(), 0), EngineError);
}

TEST(ParameterLayoutTest, OutputHeadIsWteWithItsRowsPaddedToAMultipleOf64) {
  const ParameterLayout tiny(tiny_config());  // V = 11, C = 8
  EXPECT_EQ(tiny.output_head().name, tiny.wte().name);
  EXPECT_EQ(tiny.output_head().offset, tiny.wte().offset);
  EXPECT_EQ(tiny.output_head().unit, ParameterLayout::kEmbeddingsUnit);
  EXPECT_EQ(tiny.output_head().shape, (Shape{64, 8}));
  EXPECT_EQ(tiny.wte().shape, (Shape{11, 8}));
  EXPECT_EQ(tiny.wpe().offset, 64 * 8);  // the padding rows lie between wte and wpe
  const ParameterLayout example(example_config());  // V = 256: nothing to pad
  EXPECT_EQ(example.output_head().shape, example.wte().shape);
  GptConfig gpt2 = example_config();
  gpt2.vocab = 50257;
  EXPECT_EQ(gpt2.padded_vocab(), 50304);  // llm.c's Vp for GPT-2
  EXPECT_EQ(ParameterLayout(gpt2).numel(), ParameterLayout(gpt2).param_count() + 47 * 384);
}

TEST(GptConfigTest, ValidateNamesTheBadField) {
  EXPECT_EQ(validation_error(tiny_config()), "");
  GptConfig c = tiny_config();
  c.layers = 0;
  EXPECT_THAT(validation_error(c), HasSubstr("layers"));
  c = tiny_config();
  c.heads = -1;
  EXPECT_THAT(validation_error(c), HasSubstr("heads"));
  c = tiny_config();
  c.dim = 0;
  EXPECT_THAT(validation_error(c), HasSubstr("dim"));
  c = tiny_config();
  c.seq_len = 0;
  EXPECT_THAT(validation_error(c), HasSubstr("seq_len"));
  c = tiny_config();
  c.vocab = 0;
  EXPECT_THAT(validation_error(c), HasSubstr("vocab"));
  c = tiny_config();
  c.heads = 3;  // does not divide dim 8
  EXPECT_THAT(validation_error(c), HasSubstr("heads 3 must divide dim 8"));
  EXPECT_THROW(ParameterLayout{c}, EngineError);
}

}  // namespace
}  // namespace mixtrain::model_test
