// Why: knowing that a job does not fit is half an answer; the other half
// is which configuration would. Every ZeRO stage x offload x checkpointing
// mode the spec allows is planned, those that fit a memory budget kept,
// cheapest first by what a user pays for them: communication per step,
// then recomputed FLOPs, then traffic between the pools.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/config/job_spec.h"
#include "engine/plan/memory_plan.h"

namespace mixtrain::plan {

// The settings the planner chooses between.
struct PlanChoice {
  int64_t stage = 0;
  config::OffloadTarget offload_optimizer = config::OffloadTarget::kNone;
  config::OffloadTarget offload_params = config::OffloadTarget::kNone;
  config::ActivationCheckpointing checkpointing = config::ActivationCheckpointing::kNone;

  friend bool operator==(const PlanChoice&, const PlanChoice&) = default;
};

// `choice` as the spec's keys: "zero.stage 3 + offload_optimizer cpu +
// activation_checkpointing blocks" (only what differs from the defaults
// after the stage).
std::string describe(const PlanChoice& choice);

// The choice `spec` makes, and `spec` with `choice` made.
PlanChoice choice_of(const config::JobSpec& spec);
config::JobSpec with_choice(config::JobSpec spec, const PlanChoice& choice);

struct PlanAlternative {
  PlanChoice choice;
  MemoryPlan plan;
};

// The memory of one worker, per rank.
struct MemoryBudget {
  int64_t device = 0;  // for the device pool; with `shared`, for both
  int64_t host = 0;    // for the host pool; 0: not limited
  // One memory holds both pools (the CPU backend: device and host are the
  // same RAM), so their peaks together must fit `device`.
  bool shared = false;

  // The bytes `plan` needs of `device`, and whether the plan fits.
  int64_t needed(const MemoryPlan& plan) const;
  bool fits(const MemoryPlan& plan) const;
};

// Every choice the validator accepts for `spec` whose plan on `target`
// fits `budget`, cheapest first: communication, recompute, host traffic,
// device peak.
std::vector<PlanAlternative> fitting_alternatives(const config::JobSpec& spec,
                                                  const PlanTarget& target,
                                                  const MemoryBudget& budget);

}  // namespace mixtrain::plan
