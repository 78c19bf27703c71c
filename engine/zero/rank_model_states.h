// Why: a job whose ranks cannot hold their share of the model states
// failed on the worker with an allocation error and burned its restarts
// (issue 13). The scheduler compares what each rank needs, from the ZeRO
// paper's per-rank formulas (DESIGN.md §6), with what a worker has before
// placing a rank there, and says what did not fit.
#pragma once

#include <cstdint>

#include "engine/config/job_spec.h"

namespace mixtrain {

// A rank's model-state bytes (parameters, gradients, fp32 master weights
// and AdamW's m and v) in the compute pool (`device`) and the offload pool
// (`host`): a lower bound of its memory (activations and buffers come on
// top). With Ψ parameters, N ranks and p-byte compute, stage 0 holds 16Ψ
// per rank (16-bit: 2Ψ + 2Ψ + 12Ψ; fp32: 4Ψ + 4Ψ + 8Ψ, the master being
// the parameters), stage 1 partitions the optimizer states, stage 2 also
// the gradients, stage 3 everything; offload moves the optimizer states
// (and with offload_params the parameters) to `host`.
struct RankModelStates {
  double parameters = 0;  // Ψ
  double device = 0;
  double host = 0;

  bool operator==(const RankModelStates&) const = default;
};
RankModelStates rank_model_states(const config::JobSpec& spec);

}  // namespace mixtrain
