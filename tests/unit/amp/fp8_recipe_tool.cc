// Why: drives Fp8Recipe for fp8_delayed_scaling_reference.py, which checks
// it against its own transcription of Transformer Engine's delayed-scaling
// rules. Reads from stdin one line "GEMMS HISTORY AMAX_COMPUTE MARGIN
// FORMAT" (max|most_recent, hybrid|e4m3), then one line per step of
// GEMMS*3 amaxes as fp32 bit patterns in hex (gemm-major: activation,
// weight, grad_output), and after each step prints the GEMMS*3 scales in
// effect as fp32 bit patterns in hex.
#include <bit>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>

#include "engine/amp/fp8_recipe.h"

int main() {
  using namespace mixtrain;
  int64_t gemms = 0;
  std::string amax_compute, format;
  Fp8RecipeSettings settings;
  if (!(std::cin >> gemms >> settings.amax_history >> amax_compute >> settings.margin >> format)) {
    std::cerr << "fp8_recipe_tool: expected GEMMS HISTORY AMAX_COMPUTE MARGIN FORMAT\n";
    return 2;
  }
  settings.amax_compute =
      amax_compute == "max" ? config::AmaxCompute::kMax : config::AmaxCompute::kMostRecent;
  settings.backward_format = format == "hybrid" ? Fp8Format::kE5M2 : Fp8Format::kE4M3;
  Fp8Recipe recipe(settings, gemms);
  const auto kinds = {Fp8TensorKind::kActivation, Fp8TensorKind::kWeight,
                      Fp8TensorKind::kGradOutput};
  std::string word;
  while (std::cin >> word) {
    recipe.begin_step();
    for (int64_t g = 0; g < gemms; ++g) {
      for (Fp8TensorKind kind : kinds) {
        if (g > 0 || kind != Fp8TensorKind::kActivation) std::cin >> word;
        const auto bits = static_cast<uint32_t>(std::stoul(word, nullptr, 16));
        recipe.record(g, kind, Fp8QuantizeStats{std::bit_cast<float>(bits), 0}, 1.0f);
      }
    }
    recipe.end_step();
    for (int64_t g = 0; g < gemms; ++g) {
      for (Fp8TensorKind kind : kinds) {
        std::printf("%08x ", std::bit_cast<uint32_t>(recipe.scale(g, kind)));
      }
    }
    std::printf("\n");
  }
  return 0;
}
