// Why: per-tensor fp8 scaling needs state that outlives a GEMM: which scale
// each quantized tensor uses and, for Transformer Engine's delayed
// recipe, the amax history the next scale comes from. This class is that
// state and its rules, apart from the tensors (Fp8Linear quantizes with
// it), so the rules are tested against a transcription of TE's and the
// state goes into checkpoints as plain floats.
//
// Every fp8 GEMM g has three quantized tensors (Fp8TensorKind): its input
// activation and weight (forward format) and the output gradient (backward
// format). Delayed scaling (DelayedScaling, TE's amax_and_scale_update):
//  * each tensor has a history of amax_history floats, all 0 at first, and
//    a scale, 1 at first; quantizing it during a training step uses the
//    scale and records its amax into history[0] (the maximum over the
//    step's micro-batches), which is then reduced across the ranks (max)
//    so every rank keeps the same state;
//  * at the end of the step, amax = max over the whole history (max) or
//    history[0] (most_recent); scale = (FP8_MAX * 2^-margin) / amax when
//    amax is finite and positive (FLT_MAX if that overflows), else the
//    scale is kept; then the history rolls: history[i] = history[i + 1],
//    history[L - 1] = this step's amax, history[0] = 0.
// Current scaling uses each tensor's own amax at once and mxfp8 its
// blocks' (neither has state); for both the recipe only keeps telemetry.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/config/job_spec.h"
#include "engine/numerics/fp8_scaling.h"

namespace mixtrain {

// The quantized tensors of one fp8 GEMM: the metric's `tensor` label.
enum class Fp8TensorKind { kActivation, kWeight, kGradOutput };
inline constexpr int kFp8TensorKinds = 3;

// "activation", "weight", "grad_output".
const char* fp8_tensor_kind_name(Fp8TensorKind kind);

struct Fp8RecipeSettings {
  Fp8Format forward_format = Fp8Format::kE4M3;   // activations and weights
  Fp8Format backward_format = Fp8Format::kE5M2;  // output gradients
  config::Fp8Scaling scaling = config::Fp8Scaling::kDelayed;
  int64_t amax_history = 1024;
  config::AmaxCompute amax_compute = config::AmaxCompute::kMax;
  int64_t margin = 0;
};

// The settings of precision.fp8 (hybrid: E5M2 gradients; e4m3: E4M3 both).
Fp8RecipeSettings fp8_recipe_settings(const config::Fp8Spec& spec);

// One tensor kind's figures, over every GEMM.
struct Fp8KindStats {
  float amax = 0.0f;       // the largest amax of the last finished step
  // The smallest per-tensor scale the last recorded quantizations used
  // (NaN when none was: mxfp8 scales blocks).
  float min_scale = 0.0f;
  int64_t saturated = 0;   // saturated (or MX-clamped) elements, all steps
};

class Fp8Recipe {
 public:
  // State for `gemms` GEMMs (numbered 0..gemms-1 by the model).
  Fp8Recipe(Fp8RecipeSettings settings, int64_t gemms);

  const Fp8RecipeSettings& settings() const { return settings_; }
  int64_t gemms() const { return gemms_; }
  // The fp8 format tensors of `kind` are quantized to.
  Fp8Format format(Fp8TensorKind kind) const;
  // The delayed scale of (gemm, kind); 1 before the first step's update.
  float scale(int64_t gemm, Fp8TensorKind kind) const;

  // Between begin_step() and end_step() quantizations are recorded.
  void begin_step();
  bool recording() const { return recording_; }
  // Records one quantization of (gemm, kind): its amax (history[0] keeps
  // the step's maximum), its saturated count and the per-tensor scale it
  // used (NaN for MX blocks). Ignored outside a step.
  void record(int64_t gemm, Fp8TensorKind kind, const Fp8QuantizeStats& stats, float scale);
  // This step's amax of every (gemm, kind), gemm-major, for the ranks'
  // max all-reduce, which may write the reduced values back here.
  std::span<float> step_amaxes() { return step_amax_; }
  // Applies the step: delayed scaling rolls the histories and updates the
  // scales (see the top of this file); stops recording.
  void end_step();

  // Telemetry by kind.
  Fp8KindStats stats(Fp8TensorKind kind) const;

  // The state a checkpoint keeps (scales, then the histories: delayed
  // scaling only), and its restore; throws EngineError(kInvalidArgument) on a size that does not
  // match this recipe's gemms and history length.
  std::vector<float> state() const;
  void restore(std::span<const float> state);

 private:
  size_t slot(int64_t gemm, Fp8TensorKind kind) const;

  Fp8RecipeSettings settings_;
  int64_t gemms_;
  size_t history_length_;
  std::vector<float> scales_;     // per slot
  std::vector<float> histories_;  // per slot, history_length_ each
  std::vector<float> step_amax_;  // per slot, this step
  std::vector<float> used_scales_;  // per slot, the last recorded scale (NaN: none)
  std::array<float, kFp8TensorKinds> last_amax_{};
  std::array<int64_t, kFp8TensorKinds> saturated_{};
  bool recording_ = false;
};

}  // namespace mixtrain
