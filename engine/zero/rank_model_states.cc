// Why: see rank_model_states.h.
#include "engine/zero/rank_model_states.h"

#include "engine/model/gpt_config.h"
#include "engine/model/parameter_layout.h"

namespace mixtrain {

RankModelStates rank_model_states(const config::JobSpec& spec) {
  const config::ModelSpec& model = spec.model;
  RankModelStates out;
  out.parameters = static_cast<double>(ParameterLayout(gpt_config(model)).param_count());
  const double psi = out.parameters;
  const double ranks = static_cast<double>(spec.resources.workers);
  const double p = spec.precision.compute == DType::kF32 ? 4 : 2;
  const int64_t stage = spec.zero.stage;
  const double params = p * psi / (stage >= 3 ? ranks : 1);
  const double grads = p * psi / (stage >= 2 ? ranks : 1);
  const double optimizer = (16 - 2 * p) * psi / (stage >= 1 ? ranks : 1);
  const bool offload_optimizer = spec.zero.offload_optimizer == config::OffloadTarget::kCpu;
  const bool offload_params = spec.zero.offload_params == config::OffloadTarget::kCpu;
  out.device = grads + (offload_optimizer ? 0 : optimizer) + (offload_params ? 0 : params);
  out.host = (offload_optimizer ? optimizer : 0) + (offload_params ? params : 0);
  return out;
}

}  // namespace mixtrain
