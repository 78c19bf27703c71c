// Why: the gradient-range telemetry (precision.stats_every): where this
// rank's stored gradients lie against the range of the dtype they are
// stored in, per layer group, every N steps, so that fp16 underflow (many
// zeros and subnormals: the loss scale is too small) and overflow risk
// (little headroom) are seen live. The values are the gradients as stored,
// loss scale included, after the ranks' reduction: what the optimizer
// will read. Each rank measures the gradients it owns (its partition at
// ZeRO stages 1-3), so the ranks' histograms add up to the model's. With
// compute fp8 it also holds the step's quantized GEMM inputs (activations)
// by their fp8 values: how well the scales place them in E4M3's range.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "engine/backend/backend.h"
#include "engine/common/json.h"
#include "engine/model/parameter_layout.h"
#include "engine/numerics/magnitude_histogram.h"

namespace mixtrain {

// The layer groups the histogram is split by (the metric's `group` label).
enum class GradientGroup { kEmbeddings, kAttention, kMlp, kLayerNorm };
inline constexpr int kGradientGroups = 4;

// "embeddings", "attention", "mlp", "layernorm".
const char* gradient_group_name(GradientGroup group);

// The group of a parameter of the GPT layout (by its HF name).
GradientGroup gradient_group(const ParameterInfo& parameter);

struct GradientRange {
  int64_t step = 0;           // the step it was measured after
  DType dtype = DType::kF32;  // the gradients' storage dtype
  std::array<MagnitudeHistogram, kGradientGroups> groups;
  // Compute fp8 only: the fp8 (E4M3, the forward format) values of the
  // inputs the step's forward passes quantized, every micro-batch, by the
  // group of the weight each GEMM multiplies them with.
  std::optional<std::array<MagnitudeHistogram, kGradientGroups>> fp8_activations;

  // Every group's counts together.
  MagnitudeHistogram total() const;
  // Fractions of the elements that are zero / subnormal in `dtype`.
  double zero_ratio() const;
  double subnormal_ratio() const;
  // log2(largest finite value of `dtype` / amax): how many doublings the
  // loss scale can still grow before the largest gradient overflows; 0
  // without a nonzero finite element.
  double headroom_log2() const;

  // {"step", "dtype", "min_log2", "buckets" (of total(), kMinLog2 up),
  //  "zeros", "subnormals", "nonfinite", "amax"}: what the summary keeps;
  // with fp8 also "fp8_activations": {"dtype": "fp8_e4m3", "min_log2",
  //  "buckets", ...} of their groups together.
  Json to_json() const;
  // The inverse (groups come back as one: the sum in kEmbeddings); throws
  // EngineError(kInvalidArgument) naming what is missing or wrong.
  static GradientRange from_json(const Json& json);

  bool operator==(const GradientRange&) const = default;
};

// Measures `gradients` (views of this rank's owned gradients, parameter
// `parameters[i]` for gradients[i], all of one dtype) after `step`.
GradientRange measure_gradient_range(Backend& backend, const ParameterLayout& layout,
                                     std::span<const Tensor> gradients,
                                     std::span<const size_t> parameters, int64_t step);

}  // namespace mixtrain
