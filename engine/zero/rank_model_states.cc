// Why: see rank_model_states.h.
#include "engine/zero/rank_model_states.h"

#include "engine/model/gpt_config.h"
#include "engine/model/parameter_layout.h"
#include "engine/zero/zero_placement.h"

namespace mixtrain {

RankModelStates rank_model_states(const config::JobSpec& spec) {
  const config::ModelSpec& model = spec.model;
  RankModelStates out;
  out.parameters = static_cast<double>(ParameterLayout(gpt_config(model)).param_count());
  const double psi = out.parameters;
  const double ranks = static_cast<double>(spec.resources.workers);
  const DType weights = config::model_dtype(spec.precision);
  const double p = weights == DType::kF32 ? 4 : 2;
  const ZeroPlacement placement = zero_placement(zero_settings(spec.zero), weights);
  // Bytes of `state` with `bytes_per_parameter`, added to its pool.
  const auto place = [&](StatePlacement state, double bytes_per_parameter) {
    const double bytes =
        bytes_per_parameter * psi / (state.extent == Extent::kPartition ? ranks : 1);
    (state.pool == MemoryPool::kHost ? out.host : out.device) += bytes;
  };
  place(placement.gradients, p);
  place(placement.optimizer, 16 - 2 * p);
  place(placement.weights, p);
  return out;
}

}  // namespace mixtrain
