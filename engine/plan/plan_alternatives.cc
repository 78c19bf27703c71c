// Why: see plan_alternatives.h.
#include "engine/plan/plan_alternatives.h"

#include <algorithm>
#include <tuple>

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

PlanChoice choice_of(const config::JobSpec& spec) {
  return PlanChoice{spec.zero.stage, spec.zero.offload_optimizer, spec.zero.offload_params,
                    spec.train.activation_checkpointing};
}

config::JobSpec with_choice(config::JobSpec spec, const PlanChoice& choice) {
  spec.zero.stage = choice.stage;
  spec.zero.offload_optimizer = choice.offload_optimizer;
  spec.zero.offload_params = choice.offload_params;
  spec.train.activation_checkpointing = choice.checkpointing;
  return spec;
}

int64_t MemoryBudget::needed(const MemoryPlan& plan) const {
  const int64_t device_peak = plan.peak(MemoryPool::kDevice);
  return shared ? device_peak + plan.peak(MemoryPool::kHost) : device_peak;
}

bool MemoryBudget::fits(const MemoryPlan& plan) const {
  return needed(plan) <= device && (shared || host == 0 || plan.peak(MemoryPool::kHost) <= host);
}

std::vector<PlanAlternative> fitting_alternatives(const config::JobSpec& spec,
                                                  const PlanTarget& target,
                                                  const MemoryBudget& budget) {
  std::vector<PlanAlternative> fitting;
  for (int64_t stage = 0; stage <= 3; ++stage) {
    for (OffloadTarget optimizer : {OffloadTarget::kNone, OffloadTarget::kCpu}) {
      for (OffloadTarget params : {OffloadTarget::kNone, OffloadTarget::kCpu}) {
        for (ActivationCheckpointing mode :
             {ActivationCheckpointing::kNone, ActivationCheckpointing::kSelective,
              ActivationCheckpointing::kBlocks}) {
          const PlanChoice choice{stage, optimizer, params, mode};
          const config::JobSpec candidate = with_choice(spec, choice);
          if (!config::validate(candidate).empty()) continue;
          const MemoryPlan plan = plan_memory(candidate, target);
          if (budget.fits(plan)) fitting.push_back({choice, plan});
        }
      }
    }
  }
  auto cost = [](const PlanAlternative& a) {
    return std::make_tuple(a.plan.comm_elements_per_step, a.plan.recompute_flops_per_step,
                           a.plan.host_traffic_bytes_per_step, a.plan.peak(MemoryPool::kDevice));
  };
  std::stable_sort(
      fitting.begin(), fitting.end(),
      [&](const PlanAlternative& a, const PlanAlternative& b) { return cost(a) < cost(b); });
  return fitting;
}

}  // namespace mixtrain::plan
