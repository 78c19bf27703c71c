// Why: the rules of fp8_recipe.h.
#include "engine/amp/fp8_recipe.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "engine/common/error.h"

namespace mixtrain {

const char* fp8_tensor_kind_name(Fp8TensorKind kind) {
  switch (kind) {
    case Fp8TensorKind::kActivation:
      return "activation";
    case Fp8TensorKind::kWeight:
      return "weight";
    case Fp8TensorKind::kGradOutput:
      return "grad_output";
  }
  return "unknown";
}

Fp8RecipeSettings fp8_recipe_settings(const config::Fp8Spec& spec) {
  Fp8RecipeSettings out;
  out.backward_format =
      spec.format == config::Fp8FormatChoice::kHybrid ? Fp8Format::kE5M2 : Fp8Format::kE4M3;
  out.scaling = spec.scaling;
  out.amax_history = spec.amax_history;
  out.amax_compute = spec.amax_compute;
  out.margin = spec.margin;
  return out;
}

Fp8Recipe::Fp8Recipe(Fp8RecipeSettings settings, int64_t gemms)
    : settings_(settings),
      gemms_(gemms),
      history_length_(settings.scaling == config::Fp8Scaling::kDelayed
                          ? static_cast<size_t>(settings.amax_history)
                          : 0),
      scales_(static_cast<size_t>(gemms * kFp8TensorKinds), 1.0f),
      histories_(scales_.size() * history_length_, 0.0f),
      step_amax_(scales_.size(), 0.0f),
      used_scales_(scales_.size(), std::nanf("")) {
  MIXTRAIN_CHECK_ARG(gemms >= 0 && settings.amax_history >= 1,
                     "Fp8Recipe: needs gemms >= 0 and amax_history >= 1");
}

Fp8Format Fp8Recipe::format(Fp8TensorKind kind) const {
  return kind == Fp8TensorKind::kGradOutput ? settings_.backward_format : settings_.forward_format;
}

size_t Fp8Recipe::slot(int64_t gemm, Fp8TensorKind kind) const {
  return static_cast<size_t>(gemm * kFp8TensorKinds + static_cast<int64_t>(kind));
}

float Fp8Recipe::scale(int64_t gemm, Fp8TensorKind kind) const { return scales_[slot(gemm, kind)]; }

void Fp8Recipe::begin_step() {
  std::fill(step_amax_.begin(), step_amax_.end(), 0.0f);
  recording_ = true;
}

void Fp8Recipe::record(int64_t gemm, Fp8TensorKind kind, const Fp8QuantizeStats& stats,
                       float scale) {
  if (!recording_) return;
  used_scales_[slot(gemm, kind)] = scale;
  float& amax = step_amax_[slot(gemm, kind)];
  amax = std::max(amax, stats.amax);
  saturated_[static_cast<size_t>(kind)] += stats.saturated;
}

void Fp8Recipe::end_step() {
  recording_ = false;
  last_amax_.fill(0.0f);
  for (size_t s = 0; s < scales_.size(); ++s) {
    float& kind_amax = last_amax_[s % kFp8TensorKinds];
    kind_amax = std::max(kind_amax, step_amax_[s]);
  }
  if (settings_.scaling != config::Fp8Scaling::kDelayed) return;
  const size_t length = history_length_;
  for (size_t s = 0; s < scales_.size(); ++s) {
    float* history = &histories_[s * length];
    history[0] = step_amax_[s];
    const float amax = settings_.amax_compute == config::AmaxCompute::kMax
                           ? *std::max_element(history, history + length)
                           : history[0];
    if (std::isfinite(amax) && amax > 0.0f) {
      const auto kind = static_cast<Fp8TensorKind>(s % kFp8TensorKinds);
      const float scaled_max =
          std::ldexp(fp8_max(format(kind)), -static_cast<int>(settings_.margin));
      const float scale = scaled_max / amax;
      scales_[s] = std::isinf(scale) ? FLT_MAX : scale;
    }
    // Roll: the oldest drops out, this step's amax goes last, [0] restarts.
    const float current = history[0];
    std::copy(history + 1, history + length, history);
    history[length - 1] = current;
    history[0] = 0.0f;
  }
}

Fp8KindStats Fp8Recipe::stats(Fp8TensorKind kind) const {
  Fp8KindStats out;
  const auto k = static_cast<size_t>(kind);
  out.amax = last_amax_[k];
  out.saturated = saturated_[k];
  out.min_scale = std::nanf("");
  for (int64_t g = 0; g < gemms_; ++g) {
    const float used = used_scales_[slot(g, kind)];
    if (!std::isnan(used) && !(used >= out.min_scale)) out.min_scale = used;
  }
  return out;
}

std::vector<float> Fp8Recipe::state() const {
  std::vector<float> out(scales_);
  out.insert(out.end(), histories_.begin(), histories_.end());
  return out;
}

void Fp8Recipe::restore(std::span<const float> state) {
  MIXTRAIN_CHECK_ARG(state.size() == scales_.size() + histories_.size(),
                     "fp8 recipe state has " + std::to_string(state.size()) +
                         " values; this job's recipe (" + std::to_string(gemms_) +
                         " fp8 GEMMs, amax_history " + std::to_string(history_length_) +
                         ") needs " + std::to_string(scales_.size() + histories_.size()));
  std::copy(state.begin(), state.begin() + static_cast<std::ptrdiff_t>(scales_.size()),
            scales_.begin());
  std::copy(state.begin() + static_cast<std::ptrdiff_t>(scales_.size()), state.end(),
            histories_.begin());
}

}  // namespace mixtrain
