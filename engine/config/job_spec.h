// Why: the job spec (DESIGN.md §4, YAML version 1) as plain C++ structs, so
// the engine, the worker and the coordinator share one definition of a job
// and one validation of it without depending on a YAML library. Member
// defaults are the §4 defaults; the YAML reader lives in jobspec/.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/numerics/dtype.h"

namespace mixtrain::config {

enum class ModelArch { kGpt };
enum class DataFormat { kAuto, kText, kTokens };  // text = bytes; tokens = llm.c .bin
enum class LossScaleMode { kDynamic, kStatic, kNone };
enum class OnMinScale { kFail, kContinue };
enum class OffloadTarget { kNone, kCpu };
enum class ReduceDtype { kCompute, kFp32 };  // the dtype gradients cross the ranks in
enum class BackendChoice { kAuto, kCpu, kCuda };
enum class Fp8FormatChoice { kHybrid, kE4M3 };  // hybrid: E4M3 forward, E5M2 gradients
enum class Fp8Scaling { kDelayed, kCurrent, kMxfp8 };
enum class AmaxCompute { kMax, kMostRecent };  // over the delayed recipe's history
// What the forward keeps for the backward (train.activation_checkpointing):
// everything; the GEMM outputs and residuals, recomputing attention,
// LayerNorm outputs and GELU; or each block's input only, recomputing the
// block.
enum class ActivationCheckpointing { kNone, kSelective, kBlocks };

// The training corpus that needs no download (DESIGN.md §2).
inline constexpr std::string_view kBuiltinDemoData = "builtin:demo";

struct ModelSpec {
  ModelArch arch = ModelArch::kGpt;
  int64_t layers = 6;
  int64_t heads = 6;
  int64_t dim = 384;
  int64_t seq_len = 256;
  int64_t vocab = 256;
  std::optional<std::string> init_from;  // safetensors file to start from

  friend bool operator==(const ModelSpec&, const ModelSpec&) = default;
};

struct DataSpec {
  std::string train;                   // a path or "builtin:demo"
  std::optional<std::string> val;      // a path; excludes val_fraction
  std::optional<double> val_fraction;  // unset: 0.1 when there is no val
  DataFormat format = DataFormat::kAuto;

  friend bool operator==(const DataSpec&, const DataSpec&) = default;
};

struct TrainSpec {
  int64_t steps = 2000;
  int64_t micro_batch = 8;
  int64_t grad_accum = 1;
  double lr = 6.0e-4;
  double min_lr = 6.0e-5;
  int64_t warmup_steps = 100;
  double weight_decay = 0.1;
  std::array<double, 2> betas = {0.9, 0.95};
  double grad_clip = 1.0;  // 0 disables clipping
  int64_t seed = 1337;
  int64_t eval_every = 200;
  int64_t eval_batches = 20;  // 0 disables evaluation
  ActivationCheckpointing activation_checkpointing = ActivationCheckpointing::kNone;

  friend bool operator==(const TrainSpec&, const TrainSpec&) = default;
};

// precision.fp8: how compute fp8 quantizes its GEMMs' inputs (DESIGN.md §4).
struct Fp8Spec {
  Fp8FormatChoice format = Fp8FormatChoice::kHybrid;
  Fp8Scaling scaling = Fp8Scaling::kDelayed;
  int64_t amax_history = 1024;  // steps of amax the delayed recipe remembers
  AmaxCompute amax_compute = AmaxCompute::kMax;
  int64_t margin = 0;           // scale = FP8_MAX / amax / 2^margin
  bool skip_first_last = true;  // the output head stays bf16

  friend bool operator==(const Fp8Spec&, const Fp8Spec&) = default;
};

// Calls visit(key, member) for every key of precision.fp8, e.g.
// visit("scaling", &Fp8Spec::scaling): the YAML and JSON forms walk it.
template <class Visitor>
void for_each_fp8_field(Visitor&& visit) {
  visit("format", &Fp8Spec::format);
  visit("scaling", &Fp8Spec::scaling);
  visit("amax_history", &Fp8Spec::amax_history);
  visit("amax_compute", &Fp8Spec::amax_compute);
  visit("margin", &Fp8Spec::margin);
  visit("skip_first_last", &Fp8Spec::skip_first_last);
}

// "format, scaling, ...": precision.fp8's keys for error messages.
std::string fp8_field_choices();

struct PrecisionSpec {
  DType compute = DType::kBF16;
  std::optional<LossScaleMode> loss_scale;  // unset: dynamic for fp16, none otherwise
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  int64_t hysteresis = 1;  // DeepSpeed-style delayed backoff
  double min_scale = 1.0;
  std::optional<double> max_scale;  // unset: growth is not capped
  OnMinScale on_min_scale = OnMinScale::kFail;
  // fp32 GEMMs on CUDA may round their inputs to TF32 (10-bit significand)
  // for tensor cores, as PyTorch's allow_tf32; off keeps CPU parity.
  bool tf32 = false;
  // Gradient-range telemetry every this many steps; 0 = off.
  int64_t stats_every = 100;
  // Written only with compute fp8 (unset: Fp8Spec's defaults).
  std::optional<Fp8Spec> fp8;

  friend bool operator==(const PrecisionSpec&, const PrecisionSpec&) = default;
};

struct ZeroSpec {
  int64_t stage = 0;
  OffloadTarget offload_optimizer = OffloadTarget::kNone;
  OffloadTarget offload_params = OffloadTarget::kNone;
  int64_t bucket_mb = 25;
  // fp32: 16-bit gradients are widened to fp32 for their reduction across
  // ranks and rounded back once (DeepSpeed's communication_data_type).
  ReduceDtype reduce_dtype = ReduceDtype::kCompute;

  friend bool operator==(const ZeroSpec&, const ZeroSpec&) = default;
};

struct ResourcesSpec {
  int64_t workers = 1;
  BackendChoice backend = BackendChoice::kAuto;

  friend bool operator==(const ResourcesSpec&, const ResourcesSpec&) = default;
};

struct CheckpointSpec {
  int64_t every = 500;
  int64_t keep = 3;
  std::optional<std::string> dir;  // unset: ./checkpoints/<name>

  friend bool operator==(const CheckpointSpec&, const CheckpointSpec&) = default;
};

// When a job runs relative to others (DESIGN.md §4): higher priorities
// first, FIFO within one; a preemptible job may be stopped at a step
// boundary (after a checkpoint) for a higher-priority one and resumed
// later.
struct SchedulingSpec {
  int64_t priority = 0;
  bool preemptible = true;

  friend bool operator==(const SchedulingSpec&, const SchedulingSpec&) = default;
};

struct RetriesSpec {
  int64_t max_restarts = 3;

  friend bool operator==(const RetriesSpec&, const RetriesSpec&) = default;
};

// The keys a spec may leave to the planner by writing `auto` (DESIGN.md
// §4): zero.stage, zero.offload_optimizer, zero.offload_params and
// train.activation_checkpointing. The coordinator (or `mixtrain train`, for
// this machine) chooses them: the cheapest configuration whose plan fits
// the memory the ranks get (plan::choose_configuration). Until then their
// members hold the defaults, which nothing may train or plan with.
struct AutoKeys {
  bool zero_stage = false;
  bool offload_optimizer = false;
  bool offload_params = false;
  bool activation_checkpointing = false;

  bool any() const {
    return zero_stage || offload_optimizer || offload_params || activation_checkpointing;
  }
  friend bool operator==(const AutoKeys&, const AutoKeys&) = default;
};

struct JobSpec {
  std::string name;  // required
  ModelSpec model;
  DataSpec data;
  TrainSpec train;
  PrecisionSpec precision;
  ZeroSpec zero;
  ResourcesSpec resources;
  SchedulingSpec scheduling;
  CheckpointSpec checkpoint;
  RetriesSpec retries;
  AutoKeys auto_keys;  // the keys written `auto`, left to the planner

  // Field by field, doubles exactly (as every section's operator==).
  friend bool operator==(const JobSpec&, const JobSpec&) = default;
};

// One impossible value: `key_path` is the spec key as YAML spells it
// ("model.heads"), `message` says what is wrong and what was given.
struct SpecError {
  std::string key_path;
  std::string message;
};

// The flag of AutoKeys for `key` of `section` ("zero", "stage"), or nullptr
// for a key that cannot be `auto`.
bool AutoKeys::*auto_key(std::string_view section, std::string_view key);

// The keys `auto_keys` leaves open, as the spec spells them:
// "zero.stage, train.activation_checkpointing".
std::string auto_key_names(const AutoKeys& auto_keys);

// The loss scaling in effect: the explicit choice, else dynamic for fp16
// compute and none otherwise.
LossScaleMode effective_loss_scale(const PrecisionSpec& precision);

// True when the spec asks for fp8 compute (compute: fp8).
inline bool is_fp8_compute(const PrecisionSpec& precision) {
  return precision.compute == DType::kFP8E4M3;
}

// The dtype the model's working weights, activations and non-GEMM ops use:
// bf16 for fp8 compute (only the GEMMs' inputs are fp8), else the compute
// dtype.
inline DType model_dtype(const PrecisionSpec& precision) {
  return is_fp8_compute(precision) ? DType::kBF16 : precision.compute;
}

// The fp8 settings in effect: precision.fp8, else the defaults.
inline Fp8Spec effective_fp8(const PrecisionSpec& precision) {
  return precision.fp8.value_or(Fp8Spec{});
}

// The spec's name of a compute dtype: "fp8" for fp8 compute, else dtype_name.
std::string compute_dtype_name(DType compute);

// The validation fraction in effect: 0 when data.val is set, else the
// explicit val_fraction, else 0.1.
double effective_val_fraction(const DataSpec& data);

// The checkpoint directory in effect: checkpoint.dir, else ./checkpoints/<name>.
std::string effective_checkpoint_dir(const JobSpec& spec);

// Every impossible value in `spec`, section by section; empty when the spec is
// runnable as far as can be told without the filesystem. Never throws.
std::vector<SpecError> validate(const JobSpec& spec);

// Every data file and init_from file that does not exist as a readable
// regular file ("builtin:" data needs no file), and a checkpoint directory
// that cannot be one (it, or its nearest existing ancestor, is not a
// directory). Relative paths resolve against `base_dir`, or the working
// directory when it is empty.
std::vector<SpecError> check_files(const JobSpec& spec, const std::filesystem::path& base_dir = {});

// Parses a compute dtype as the spec spells it: fp32, fp16, bf16 (and their
// long names), fp8 (DType::kFP8E4M3, which compute_dtype_name spells back as
// "fp8"), or fp8_e4m3 / fp8_e5m2, which parse so that validate() can say
// how to ask for fp8. nullopt for anything else.
std::optional<DType> parse_compute_dtype(std::string_view name);

// The spec's spelling of each enum value, in declaration order; one table
// per enum so that names live in one place (found by overload on a tag).
constexpr std::array<std::pair<ModelArch, std::string_view>, 1> enum_names(ModelArch) {
  return {{{ModelArch::kGpt, "gpt"}}};
}
constexpr std::array<std::pair<DataFormat, std::string_view>, 3> enum_names(DataFormat) {
  return {
      {{DataFormat::kAuto, "auto"}, {DataFormat::kText, "text"}, {DataFormat::kTokens, "tokens"}}};
}
constexpr std::array<std::pair<LossScaleMode, std::string_view>, 3> enum_names(LossScaleMode) {
  return {{{LossScaleMode::kDynamic, "dynamic"},
           {LossScaleMode::kStatic, "static"},
           {LossScaleMode::kNone, "none"}}};
}
constexpr std::array<std::pair<OnMinScale, std::string_view>, 2> enum_names(OnMinScale) {
  return {{{OnMinScale::kFail, "fail"}, {OnMinScale::kContinue, "continue"}}};
}
constexpr std::array<std::pair<OffloadTarget, std::string_view>, 2> enum_names(OffloadTarget) {
  return {{{OffloadTarget::kNone, "none"}, {OffloadTarget::kCpu, "cpu"}}};
}
constexpr std::array<std::pair<ReduceDtype, std::string_view>, 2> enum_names(ReduceDtype) {
  return {{{ReduceDtype::kCompute, "compute"}, {ReduceDtype::kFp32, "fp32"}}};
}
constexpr std::array<std::pair<BackendChoice, std::string_view>, 3> enum_names(BackendChoice) {
  return {{{BackendChoice::kAuto, "auto"},
           {BackendChoice::kCpu, "cpu"},
           {BackendChoice::kCuda, "cuda"}}};
}
constexpr std::array<std::pair<Fp8FormatChoice, std::string_view>, 2> enum_names(Fp8FormatChoice) {
  return {{{Fp8FormatChoice::kHybrid, "hybrid"}, {Fp8FormatChoice::kE4M3, "e4m3"}}};
}
constexpr std::array<std::pair<Fp8Scaling, std::string_view>, 3> enum_names(Fp8Scaling) {
  return {{{Fp8Scaling::kDelayed, "delayed"},
           {Fp8Scaling::kCurrent, "current"},
           {Fp8Scaling::kMxfp8, "mxfp8"}}};
}
constexpr std::array<std::pair<AmaxCompute, std::string_view>, 2> enum_names(AmaxCompute) {
  return {{{AmaxCompute::kMax, "max"}, {AmaxCompute::kMostRecent, "most_recent"}}};
}

constexpr std::array<std::pair<ActivationCheckpointing, std::string_view>, 3> enum_names(
    ActivationCheckpointing) {
  return {{{ActivationCheckpointing::kNone, "none"},
           {ActivationCheckpointing::kSelective, "selective"},
           {ActivationCheckpointing::kBlocks, "blocks"}}};
}

// The spec's name of `value` ("dynamic" for LossScaleMode::kDynamic).
template <class E>
constexpr std::string_view enum_name(E value) {
  for (const auto& [candidate, name] : enum_names(E{}))
    if (candidate == value) return name;
  return "unknown";
}

// The enum value the spec spells `name`, or nullopt (exact, case-sensitive).
template <class E>
constexpr std::optional<E> parse_enum(std::string_view name) {
  for (const auto& [value, candidate] : enum_names(E{}))
    if (candidate == name) return value;
  return std::nullopt;
}

// The accepted names for error messages: "auto, text, tokens".
template <class E>
std::string enum_choices() {
  std::string out;
  for (const auto& [value, name] : enum_names(E{})) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

}  // namespace mixtrain::config
