// Why: knowing that a job does not fit is half an answer; the other half
// is which configuration would. Every ZeRO stage x offload x checkpointing
// mode the spec allows is planned, those that fit a memory budget kept,
// cheapest first by what a user pays for them: communication per step,
// then recomputed FLOPs, then traffic between the pools. The same order
// chooses the keys a spec leaves `auto`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/common/json.h"
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

// The keys `open` leaves `auto`, as `choice` sets them: "zero.stage 3,
// train.activation_checkpointing none".
std::string describe_auto(const PlanChoice& choice, const config::AutoKeys& open);

// {"zero_stage": 3, "offload_optimizer": "cpu", "offload_params": "none",
// "activation_checkpointing": "blocks"}, and back (throws
// EngineError(kInvalidArgument) naming a missing or unknown value).
Json choice_json(const PlanChoice& choice);
PlanChoice choice_from_json(const Json& json);

// The choice `spec` makes, and `spec` with `choice` made (no key `auto`).
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

// Every choice the validator accepts for `spec` that differs from it only
// in the keys `open` names (all of them: any stage, offload and
// checkpointing), with its plan on `target`, cheapest first:
// communication, recompute, host traffic, device peak. With nothing open,
// just `spec` as written. Throws as plan_memory does.
std::vector<PlanAlternative> alternatives(const config::JobSpec& spec, const PlanTarget& target,
                                          const config::AutoKeys& open);

// Every choice of any stage, offload and checkpointing that fits `budget`,
// cheapest first.
std::vector<PlanAlternative> fitting_alternatives(const config::JobSpec& spec,
                                                  const PlanTarget& target,
                                                  const MemoryBudget& budget);

// What `auto` becomes: the cheapest choice of the keys `spec` leaves
// `auto` that fits `budget` (for a spec without any, the spec's own if it
// fits); nullopt when none does.
std::optional<PlanAlternative> choose_configuration(const config::JobSpec& spec,
                                                    const PlanTarget& target,
                                                    const MemoryBudget& budget);

// What a rank needs of a worker in one configuration, as the coordinator
// checks it: the pools' planned peaks, and the parameter count.
struct RankMemory {
  double parameters = 0;
  double device = 0;  // with the CUDA runtime's and NCCL's (MemoryPlan::device_need)
  double host = 0;

  bool operator==(const RankMemory&) const = default;
};

struct RankConfiguration {
  PlanChoice choice;
  RankMemory memory;

  bool operator==(const RankConfiguration&) const = default;
};

// The configurations a rank of `spec` may run with, cheapest first, planned
// on scheduling_target(spec): the spec's own, or every valid choice of the
// keys it leaves `auto`. Throws as plan_memory does.
std::vector<RankConfiguration> rank_configurations(const config::JobSpec& spec);

}  // namespace mixtrain::plan
