// Why: the measurement and JSON of gradient_range.h.
#include "engine/train/gradient_range.h"

#include <cmath>
#include <limits>
#include <string_view>
#include <vector>

#include "engine/common/error.h"

namespace mixtrain {
namespace {

constexpr const char* kContext = "gradient range";

// The largest finite value of a compute dtype.
double max_finite(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return 65504.0;
    case DType::kBF16:
      return std::ldexp(255.0, 120);  // 0x7F7F
    default:
      return std::numeric_limits<float>::max();
  }
}

// The sum of a set of group histograms.
MagnitudeHistogram sum_of(const std::array<MagnitudeHistogram, kGradientGroups>& groups) {
  MagnitudeHistogram sum;
  for (const MagnitudeHistogram& group : groups) sum.add(group);
  return sum;
}

// {"dtype", "min_log2", "buckets", "zeros", "subnormals", "nonfinite", "amax"}.
Json histogram_json(const MagnitudeHistogram& histogram, DType dtype) {
  Json out = Json::object();
  out["dtype"] = dtype_name(dtype);
  out["min_log2"] = MagnitudeHistogram::kMinLog2;
  out["buckets"] = histogram.buckets;
  out["zeros"] = histogram.zeros;
  out["subnormals"] = histogram.subnormals;
  out["nonfinite"] = histogram.nonfinite;
  out["amax"] = histogram.amax;
  return out;
}

// The inverse of histogram_json; `dtype` gets its dtype.
MagnitudeHistogram histogram_from_json(const Json& json, const std::string& context, DType& dtype) {
  const JsonFields fields(json, context);
  dtype = parse_dtype(fields.string("dtype"));
  MIXTRAIN_CHECK_ARG(
      fields.integer("min_log2") == MagnitudeHistogram::kMinLog2,
      context + ": \"min_log2\" must be " + std::to_string(MagnitudeHistogram::kMinLog2));
  const Json& buckets = fields.array("buckets");
  MIXTRAIN_CHECK_ARG(buckets.size() == MagnitudeHistogram::kBuckets,
                     context + ": \"buckets\" must list " +
                         std::to_string(MagnitudeHistogram::kBuckets) + " counts");
  MagnitudeHistogram out;
  for (size_t i = 0; i < buckets.size(); ++i) {
    MIXTRAIN_CHECK_ARG(buckets[i].is_number_integer(),
                       context + ": \"buckets\" must hold integers");
    out.buckets[i] = buckets[i].get<int64_t>();
  }
  out.zeros = fields.integer("zeros");
  out.subnormals = fields.integer("subnormals");
  out.nonfinite = fields.integer("nonfinite");
  out.amax = static_cast<float>(fields.number("amax"));
  return out;
}

}  // namespace

const char* gradient_group_name(GradientGroup group) {
  switch (group) {
    case GradientGroup::kEmbeddings:
      return "embeddings";
    case GradientGroup::kAttention:
      return "attention";
    case GradientGroup::kMlp:
      return "mlp";
    case GradientGroup::kLayerNorm:
      return "layernorm";
  }
  return "unknown";
}

GradientGroup gradient_group(const ParameterInfo& parameter) {
  const std::string_view name = parameter.name;
  if (name.find(".attn.") != std::string_view::npos) return GradientGroup::kAttention;
  if (name.find(".mlp.") != std::string_view::npos) return GradientGroup::kMlp;
  if (name.find("ln_") != std::string_view::npos) return GradientGroup::kLayerNorm;
  return GradientGroup::kEmbeddings;
}

MagnitudeHistogram GradientRange::total() const { return sum_of(groups); }

double GradientRange::zero_ratio() const {
  const MagnitudeHistogram all = total();
  return all.total() > 0 ? static_cast<double>(all.zeros) / static_cast<double>(all.total()) : 0.0;
}

double GradientRange::subnormal_ratio() const {
  const MagnitudeHistogram all = total();
  return all.total() > 0 ? static_cast<double>(all.subnormals) / static_cast<double>(all.total())
                         : 0.0;
}

double GradientRange::headroom_log2() const {
  const float amax = total().amax;
  return amax > 0.0f ? std::log2(max_finite(dtype) / static_cast<double>(amax)) : 0.0;
}

Json GradientRange::to_json() const {
  Json out = Json::object();
  out["step"] = step;
  const Json histogram = histogram_json(total(), dtype);
  for (const auto& [key, value] : histogram.items()) out[key] = value;
  if (fp8_activations) {
    out["fp8_activations"] = histogram_json(sum_of(*fp8_activations), DType::kFP8E4M3);
  }
  return out;
}

GradientRange GradientRange::from_json(const Json& json) {
  const JsonFields fields(json, kContext);
  GradientRange out;
  out.step = fields.integer("step");
  out.groups[0] = histogram_from_json(json, kContext, out.dtype);
  if (json.contains("fp8_activations")) {
    DType dtype = DType::kF32;
    out.fp8_activations.emplace();
    (*out.fp8_activations)[0] = histogram_from_json(
        json["fp8_activations"], std::string(kContext) + ": fp8_activations", dtype);
    MIXTRAIN_CHECK_ARG(dtype == DType::kFP8E4M3,
                       std::string(kContext) + ": fp8_activations must be fp8_e4m3");
  }
  return out;
}

GradientRange measure_gradient_range(Backend& backend, const ParameterLayout& layout,
                                     std::span<const Tensor> gradients,
                                     std::span<const size_t> parameters, int64_t step) {
  GradientRange out;
  out.step = step;
  std::array<std::vector<Tensor>, kGradientGroups> by_group;
  for (size_t i = 0; i < gradients.size(); ++i) {
    out.dtype = gradients[i].dtype();
    const GradientGroup group = gradient_group(layout.parameters()[parameters[i]]);
    by_group[static_cast<size_t>(group)].push_back(gradients[i]);
  }
  for (size_t g = 0; g < by_group.size(); ++g)
    out.groups[g] = backend.magnitude_histogram(by_group[g]);
  return out;
}

}  // namespace mixtrain
