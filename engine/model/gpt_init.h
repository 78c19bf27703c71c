// Why: GPT-2's initial weights (Radford et al. 2019, as in llm.c and HF),
// reproducible bit for bit from a seed on every machine and standard
// library, so that runs, ranks and tests start from the same point.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/gpt_config.h"
#include "engine/model/parameter_layout.h"

namespace mixtrain {

// The standard deviation of the N(0, std) weights and embeddings.
inline constexpr double kGptInitStd = 0.02;

// layout.numel() fp32 values in layout order: weights and embeddings
// N(0, 0.02); residual output projections (attn.c_proj.weight,
// mlp.c_proj.weight) N(0, 0.02 / sqrt(2 * layers)); biases 0; LayerNorm
// weights 1 and biases 0. The normals come from one std::mt19937_64 seeded
// with `seed` through Box-Muller, drawn in layout order, so the result
// depends only on (layout, config, seed).
std::vector<float> gpt2_init(const ParameterLayout& layout, const GptConfig& config,
                             uint64_t seed);

}  // namespace mixtrain
