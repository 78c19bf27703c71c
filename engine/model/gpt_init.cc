// Why: see gpt_init.h. The normal sampler is written here (Box-Muller on
// 53-bit uniforms) because std::normal_distribution differs between
// standard libraries, and initial weights must not.
#include "engine/model/gpt_init.h"

#include <cmath>
#include <numbers>
#include <random>

namespace mixtrain {
namespace {

// Standard normal numbers from a 64-bit Mersenne Twister, two per pair of
// uniforms (Box-Muller), the second kept for the next call.
class NormalSampler {
 public:
  explicit NormalSampler(uint64_t seed) : rng_(seed) {}

  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    // u1 in (0, 1] so that log(u1) is finite; u2 in [0, 1).
    const double u1 = 1.0 - uniform();
    const double u2 = uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
  }

 private:
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

  std::mt19937_64 rng_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace

std::vector<float> gpt2_init(const ParameterLayout& layout, const GptConfig& config,
                             uint64_t seed) {
  config.validate();
  std::vector<float> weights(static_cast<size_t>(layout.numel()));
  NormalSampler normal(seed);
  const double residual_std = kGptInitStd / std::sqrt(2.0 * static_cast<double>(config.layers));
  for (const ParameterInfo& info : layout.parameters()) {
    float* out = weights.data() + info.offset;
    double std_dev = 0.0;
    float constant = 0.0f;
    switch (info.kind) {
      case ParameterKind::kEmbedding:
      case ParameterKind::kLinearWeight: std_dev = kGptInitStd; break;
      case ParameterKind::kResidualProjectionWeight: std_dev = residual_std; break;
      case ParameterKind::kLayerNormWeight: constant = 1.0f; break;
      case ParameterKind::kLinearBias:
      case ParameterKind::kLayerNormBias: break;
    }
    for (int64_t i = 0; i < info.numel; ++i) {
      out[i] = std_dev > 0.0 ? static_cast<float>(std_dev * normal.next()) : constant;
    }
  }
  return weights;
}

}  // namespace mixtrain
