// Why: see plan_alternatives.h.
#include "engine/plan/plan_alternatives.h"

#include <algorithm>
#include <tuple>
#include <type_traits>

#include "engine/common/error.h"
#include "engine/model/gpt_config.h"
#include "engine/model/parameter_layout.h"

namespace mixtrain::plan {

using config::ActivationCheckpointing;
using config::OffloadTarget;

std::string describe(const PlanChoice& choice) {
  std::string out = "zero.stage " + std::to_string(choice.stage);
  if (choice.offload_optimizer != OffloadTarget::kNone)
    out += " + offload_optimizer " + std::string(config::enum_name(choice.offload_optimizer));
  if (choice.offload_params != OffloadTarget::kNone)
    out += " + offload_params " + std::string(config::enum_name(choice.offload_params));
  if (choice.checkpointing != ActivationCheckpointing::kNone)
    out += " + activation_checkpointing " + std::string(config::enum_name(choice.checkpointing));
  return out;
}

std::string describe_auto(const PlanChoice& choice, const config::AutoKeys& open) {
  std::string out;
  const auto add = [&](bool is_open, const std::string& text) {
    if (is_open) out += (out.empty() ? "" : ", ") + text;
  };
  add(open.zero_stage, "zero.stage " + std::to_string(choice.stage));
  add(open.offload_optimizer,
      "zero.offload_optimizer " + std::string(config::enum_name(choice.offload_optimizer)));
  add(open.offload_params,
      "zero.offload_params " + std::string(config::enum_name(choice.offload_params)));
  add(open.activation_checkpointing,
      "train.activation_checkpointing " + std::string(config::enum_name(choice.checkpointing)));
  return out;
}

Json choice_json(const PlanChoice& choice) {
  Json out = Json::object();
  out["zero_stage"] = choice.stage;
  out["offload_optimizer"] = config::enum_name(choice.offload_optimizer);
  out["offload_params"] = config::enum_name(choice.offload_params);
  out["activation_checkpointing"] = config::enum_name(choice.checkpointing);
  return out;
}

namespace {

// Every value of a key when it is open, else the one written.
template <class T>
std::vector<T> values(bool is_open, T written, std::type_identity_t<std::initializer_list<T>> all) {
  return is_open ? std::vector<T>(all) : std::vector<T>{written};
}

template <class E>
E parse_choice_enum(const JsonFields& fields, std::string_view key) {
  const std::optional<E> parsed = config::parse_enum<E>(fields.string(key));
  if (!parsed) {
    throw EngineError(
        ErrorCode::kInvalidArgument,
        "configuration: \"" + std::string(key) + "\" must be one of " + config::enum_choices<E>());
  }
  return *parsed;
}

}  // namespace

PlanChoice choice_from_json(const Json& json) {
  const JsonFields fields(json, "configuration");
  return PlanChoice{fields.integer("zero_stage"),
                    parse_choice_enum<OffloadTarget>(fields, "offload_optimizer"),
                    parse_choice_enum<OffloadTarget>(fields, "offload_params"),
                    parse_choice_enum<ActivationCheckpointing>(fields, "activation_checkpointing")};
}

PlanChoice choice_of(const config::JobSpec& spec) {
  return PlanChoice{spec.zero.stage, spec.zero.offload_optimizer, spec.zero.offload_params,
                    spec.train.activation_checkpointing};
}

config::JobSpec with_choice(config::JobSpec spec, const PlanChoice& choice) {
  spec.zero.stage = choice.stage;
  spec.zero.offload_optimizer = choice.offload_optimizer;
  spec.zero.offload_params = choice.offload_params;
  spec.train.activation_checkpointing = choice.checkpointing;
  spec.auto_keys = {};
  return spec;
}

int64_t MemoryBudget::needed(const MemoryPlan& plan) const {
  return shared ? plan.peak(MemoryPool::kDevice) + plan.peak(MemoryPool::kHost)
                : plan.device_need();
}

bool MemoryBudget::fits(const MemoryPlan& plan) const {
  return needed(plan) <= device && (shared || host == 0 || plan.peak(MemoryPool::kHost) <= host);
}

std::vector<PlanAlternative> alternatives(const config::JobSpec& spec, const PlanTarget& target,
                                          const config::AutoKeys& open) {
  std::vector<PlanAlternative> valid;
  for (int64_t stage : values(open.zero_stage, spec.zero.stage, {0, 1, 2, 3})) {
    for (OffloadTarget optimizer : values(open.offload_optimizer, spec.zero.offload_optimizer,
                                          {OffloadTarget::kNone, OffloadTarget::kCpu})) {
      for (OffloadTarget params : values(open.offload_params, spec.zero.offload_params,
                                         {OffloadTarget::kNone, OffloadTarget::kCpu})) {
        for (ActivationCheckpointing mode :
             values(open.activation_checkpointing, spec.train.activation_checkpointing,
                    {ActivationCheckpointing::kNone, ActivationCheckpointing::kSelective,
                     ActivationCheckpointing::kBlocks})) {
          const PlanChoice choice{stage, optimizer, params, mode};
          const config::JobSpec candidate = with_choice(spec, choice);
          if (!config::validate(candidate).empty()) continue;
          valid.push_back({choice, plan_memory(candidate, target)});
        }
      }
    }
  }
  auto cost = [](const PlanAlternative& a) {
    return std::make_tuple(a.plan.comm_elements_per_step, a.plan.recompute_flops_per_step,
                           a.plan.host_traffic_bytes_per_step, a.plan.peak(MemoryPool::kDevice));
  };
  std::stable_sort(
      valid.begin(), valid.end(),
      [&](const PlanAlternative& a, const PlanAlternative& b) { return cost(a) < cost(b); });
  return valid;
}

std::vector<PlanAlternative> fitting_alternatives(const config::JobSpec& spec,
                                                  const PlanTarget& target,
                                                  const MemoryBudget& budget) {
  std::vector<PlanAlternative> fitting =
      alternatives(spec, target, config::AutoKeys{true, true, true, true});
  std::erase_if(fitting, [&](const PlanAlternative& a) { return !budget.fits(a.plan); });
  return fitting;
}

std::optional<PlanAlternative> choose_configuration(const config::JobSpec& spec,
                                                    const PlanTarget& target,
                                                    const MemoryBudget& budget) {
  for (PlanAlternative& a : alternatives(spec, target, spec.auto_keys))
    if (budget.fits(a.plan)) return std::move(a);
  return std::nullopt;
}

std::vector<RankConfiguration> rank_configurations(const config::JobSpec& spec) {
  const double parameters =
      static_cast<double>(ParameterLayout(gpt_config(spec.model)).param_count());
  std::vector<RankConfiguration> configurations;
  for (const PlanAlternative& a : alternatives(spec, scheduling_target(spec), spec.auto_keys)) {
    configurations.push_back(
        {a.choice, RankMemory{parameters, static_cast<double>(a.plan.device_need()),
                              static_cast<double>(a.plan.peak(MemoryPool::kHost))}});
  }
  return configurations;
}

}  // namespace mixtrain::plan
