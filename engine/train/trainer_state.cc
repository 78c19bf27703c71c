// Why: the checkpoint state JSON of a trainer, its reading and the
// compatibility check run before any tensor is restored.
#include "engine/train/trainer_state.h"

#include <string_view>

#include "engine/common/error.h"

namespace mixtrain {

namespace {

constexpr std::string_view kFormat = "mixtrain-trainer-state";
constexpr int64_t kVersion = 1;

std::string shape_text(const GptConfig& model) {
  return "{layers " + std::to_string(model.layers) + ", heads " + std::to_string(model.heads) +
         ", dim " + std::to_string(model.dim) + ", seq_len " + std::to_string(model.seq_len) +
         ", vocab " + std::to_string(model.vocab) + "}";
}

void check_model_field(std::string_view key, int64_t saved, int64_t wanted,
                       const TrainerState& state, const GptConfig& model,
                       const std::string& source) {
  MIXTRAIN_CHECK_ARG(saved == wanted, source + ": cannot resume: the checkpoint holds a model " +
                                          shape_text(state.model) + " but the job spec has model " +
                                          shape_text(model) + " (model." + std::string(key) + " " +
                                          std::to_string(saved) + " vs " + std::to_string(wanted) +
                                          ")");
}

}  // namespace

Json trainer_state_to_json(const TrainerState& state) {
  Json scaler = Json::object();
  scaler["scale"] = static_cast<double>(state.scaler.scale);
  scaler["growth_tracker"] = state.scaler.growth_tracker;
  scaler["hysteresis_left"] = state.scaler.hysteresis_left;
  scaler["overflow_steps"] = state.scaler.overflow_steps;
  Json sampler = Json::object();
  sampler["seed"] = static_cast<int64_t>(state.sampler.seed);
  sampler["next_step"] = static_cast<int64_t>(state.sampler.next_step);
  Json counters = Json::object();
  counters["nan_events"] = state.nan_events;
  counters["inf_events"] = state.inf_events;
  Json model = Json::object();
  model["layers"] = state.model.layers;
  model["heads"] = state.model.heads;
  model["dim"] = state.model.dim;
  model["seq_len"] = state.model.seq_len;
  model["vocab"] = state.model.vocab;

  Json out = Json::object();
  out["format"] = kFormat;
  out["version"] = kVersion;
  out["step"] = state.step;
  out["optimizer_steps"] = state.optimizer_steps;
  out["loss_scaler"] = std::move(scaler);
  out["sampler"] = std::move(sampler);
  out["counters"] = std::move(counters);
  out["last_train_loss"] = number_or_null(state.last_train_loss);
  out["last_val_loss"] = number_or_null(state.last_val_loss);
  out["model"] = std::move(model);
  out["compute_dtype"] = dtype_name(state.compute_dtype);
  return out;
}

TrainerState trainer_state_from_json(const Json& json, const std::string& source) {
  const JsonFields root(json, source + ": trainer state");
  MIXTRAIN_CHECK_ARG(
      root.string("format") == kFormat,
      source + ": not a mixtrain trainer state (format \"" + root.string("format") + "\")");
  MIXTRAIN_CHECK_ARG(root.integer("version") == kVersion,
                     source + ": trainer state version " + std::to_string(root.integer("version")) +
                         " is not supported (expected " + std::to_string(kVersion) + ")");
  TrainerState state;
  state.step = root.integer("step");
  state.optimizer_steps = root.integer("optimizer_steps");
  MIXTRAIN_CHECK_ARG(
      state.step >= 0 && state.optimizer_steps >= 0 && state.optimizer_steps <= state.step,
      source + ": trainer state step " + std::to_string(state.step) + " and optimizer_steps " +
          std::to_string(state.optimizer_steps) + " are inconsistent");
  const JsonFields scaler = root.object("loss_scaler");
  state.scaler.scale = static_cast<float>(scaler.number("scale"));
  state.scaler.growth_tracker = scaler.integer("growth_tracker");
  state.scaler.hysteresis_left = scaler.integer("hysteresis_left");
  state.scaler.overflow_steps = scaler.integer("overflow_steps");
  const JsonFields sampler = root.object("sampler");
  state.sampler.seed = static_cast<uint64_t>(sampler.integer("seed"));
  state.sampler.next_step = static_cast<uint64_t>(sampler.integer("next_step"));
  const JsonFields counters = root.object("counters");
  state.nan_events = counters.integer("nan_events");
  state.inf_events = counters.integer("inf_events");
  state.last_train_loss = root.optional_number("last_train_loss");
  state.last_val_loss = root.optional_number("last_val_loss");
  const JsonFields model = root.object("model");
  state.model.layers = model.integer("layers");
  state.model.heads = model.integer("heads");
  state.model.dim = model.integer("dim");
  state.model.seq_len = model.integer("seq_len");
  state.model.vocab = model.integer("vocab");
  state.compute_dtype = parse_dtype(root.string("compute_dtype"));
  return state;
}

void check_resumable(const TrainerState& state, const GptConfig& model, DType compute_dtype,
                     const std::string& source) {
  check_model_field("layers", state.model.layers, model.layers, state, model, source);
  check_model_field("heads", state.model.heads, model.heads, state, model, source);
  check_model_field("dim", state.model.dim, model.dim, state, model, source);
  check_model_field("seq_len", state.model.seq_len, model.seq_len, state, model, source);
  check_model_field("vocab", state.model.vocab, model.vocab, state, model, source);
  MIXTRAIN_CHECK_ARG(state.compute_dtype == compute_dtype,
                     source +
                         ": cannot resume: the checkpoint was trained with "
                         "precision.compute " +
                         dtype_name(state.compute_dtype) + " but the job spec has " +
                         dtype_name(compute_dtype));
}

}  // namespace mixtrain
