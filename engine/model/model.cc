// Why: what every model does the same around its passes (the flat-buffer
// entry points and their checks), and the choice of a model's class
// (model.h).
#include "engine/model/model.h"

#include <string>

#include "engine/backend/op_checks.h"
#include "engine/common/error.h"
#include "engine/model/gpt.h"

namespace mixtrain {

void Model::check_params(const char* op, const Tensor& params) const {
  MIXTRAIN_CHECK_ARG(params.defined(), std::string(op) + ": params is undefined");
  op_checks::check_dtype(op, "params", params, compute_dtype());
  op_checks::check_numel(op, "params", params, layout().numel());
}

float Model::forward(const Tensor& params, const Tensor& tokens, const Tensor& targets) {
  check_params("forward", params);
  FlatModelWeights weights(params, Tensor());
  return forward(weights, tokens, targets);
}

void Model::backward(const Tensor& params, const Tensor& grads, float dloss) {
  constexpr const char* kOp = "backward";
  check_params(kOp, params);
  MIXTRAIN_CHECK_ARG(grads.defined(), std::string(kOp) + ": grads is undefined");
  op_checks::check_dtype(kOp, "grads", grads, grad_dtype());
  op_checks::check_numel(kOp, "grads", grads, layout().numel());
  FlatModelWeights weights(params, grads);
  backward(weights, dloss);
}

std::unique_ptr<Model> make_model(Backend& backend, const GptConfig& config, DType compute_dtype,
                                  DType grad_dtype, int64_t unit_alignment,
                                  config::ActivationCheckpointing checkpointing) {
  return std::make_unique<Gpt>(backend, config, compute_dtype, grad_dtype, unit_alignment,
                               checkpointing);
}

}  // namespace mixtrain
