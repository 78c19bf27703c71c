// Why: the Gpt entry points: argument checks (so a bad call fails before
// any memory is touched, naming the argument), activation management, the
// fp32 loss reduction, and the state that orders forward and backward.
// The passes themselves are in gpt_forward.cc and gpt_backward.cc.
#include "engine/model/gpt.h"

#include <string>
#include <vector>

#include "engine/backend/op_checks.h"
#include "engine/common/error.h"

namespace mixtrain {
namespace {

using op_checks::check_dtype;
using op_checks::check_ids;

// ids is a host-readable (B,T) int32 tensor with 0 < T <= seq_len and
// values in [0, vocab).
void check_id_tensor(const char* op, const char* name, const Tensor& ids, const GptConfig& config) {
  MIXTRAIN_CHECK_ARG(ids.defined(), std::string(op) + ": " + name + " is undefined");
  check_dtype(op, name, ids, DType::kI32);
  MIXTRAIN_CHECK_ARG(
      ids.ndim() == 2 && ids.dim(0) > 0 && ids.dim(1) > 0,
      std::string(op) + ": " + name + " " + ids.describe() + " must be (B, T) with B, T > 0");
  MIXTRAIN_CHECK_ARG(ids.dim(1) <= config.seq_len,
                     std::string(op) + ": " + name + " " + ids.describe() +
                         " has T = " + std::to_string(ids.dim(1)) + " > seq_len " +
                         std::to_string(config.seq_len));
  MIXTRAIN_CHECK_ARG(ids.device_type() == DeviceType::kCpu,
                     std::string(op) + ": " + name + " must be in host-readable memory");
  check_ids(op, name, ids, config.vocab, "vocab size");
}

}  // namespace

Gpt::Gpt(Backend& backend, GptConfig config, DType compute_dtype, DType grad_dtype,
         int64_t unit_alignment, config::ActivationCheckpointing checkpointing)
    : backend_(backend),
      config_(config),
      layout_(config_, unit_alignment),
      compute_dtype_(compute_dtype),
      grad_dtype_(grad_dtype),
      checkpointing_(checkpointing) {
  MIXTRAIN_CHECK_ARG(is_float_compute(compute_dtype), std::string("Gpt: compute dtype ") +
                                                          dtype_name(compute_dtype) +
                                                          " must be fp32, bf16 or fp16");
  MIXTRAIN_CHECK_ARG(grad_dtype == compute_dtype || grad_dtype == DType::kF32,
                     std::string("Gpt: grad dtype ") + dtype_name(grad_dtype) +
                         " must be the compute dtype (" + dtype_name(compute_dtype) + ") or fp32");
}

Gpt::~Gpt() = default;

int64_t Gpt::fp8_gemm_count(bool quantize_head) const {
  return 4 * config_.layers + (quantize_head ? 1 : 0);
}

void Gpt::set_fp8(Fp8Linear* fp8, bool quantize_head) {
  MIXTRAIN_CHECK_ARG(fp8 == nullptr || fp8->recipe().gemms() == fp8_gemm_count(quantize_head),
                     "Gpt::set_fp8: the recipe numbers " +
                         std::to_string(fp8 ? fp8->recipe().gemms() : 0) + " GEMMs, the model " +
                         std::to_string(fp8_gemm_count(quantize_head)));
  fp8_ = fp8;
  fp8_head_ = fp8 != nullptr && quantize_head;
}

const ParameterInfo& Gpt::fp8_gemm_weight(int64_t gemm) const {
  static constexpr BlockParameter kBlockGemms[] = {
      BlockParameter::kAttnQkvWeight, BlockParameter::kAttnProjWeight, BlockParameter::kMlpFcWeight,
      BlockParameter::kMlpProjWeight};
  MIXTRAIN_CHECK_ARG(gemm >= 0 && gemm <= 4 * config_.layers,
                     "Gpt::fp8_gemm_weight: no fp8 GEMM " + std::to_string(gemm));
  if (gemm == 4 * config_.layers) return layout_.output_head();
  return layout_.block(gemm / 4, kBlockGemms[gemm % 4]);
}

void Gpt::prepare_forward(const Tensor& tokens, const Tensor* targets) {
  constexpr const char* kOp = "Gpt::forward";
  check_id_tensor(kOp, "tokens", tokens, config_);
  if (targets != nullptr) {
    check_id_tensor(kOp, "targets", *targets, config_);
    MIXTRAIN_CHECK_ARG(targets->shape() == tokens.shape(),
                       std::string(kOp) + ": targets " + targets->describe() +
                           " must have the shape of tokens " + tokens.describe());
  }
  const int64_t batch = tokens.dim(0), seq = tokens.dim(1);
  if (!acts_ || acts_->batch != batch || acts_->seq != seq) {
    acts_.reset();  // free the old shape's memory before allocating the new
    grad_acts_.reset();
    acts_ = std::make_unique<GptActivations>(backend_, config_, compute_dtype_, batch, seq,
                                             checkpointing_);
  }
  backend_.copy(acts_->tokens, tokens);
  if (targets != nullptr) backend_.copy(acts_->targets, *targets);
}

float Gpt::forward(ModelWeights& weights, const Tensor& tokens, const Tensor& targets) {
  prepare_forward(tokens, &targets);
  logits_valid_ = false;
  backward_pending_ = false;
  run_forward(weights);
  backend_.softmax_cross_entropy(acts_->losses, nullptr, acts_->logits, acts_->targets, 1.0f,
                                 config_.vocab);
  std::vector<float> losses(static_cast<size_t>(acts_->losses.numel()));
  backend_.copy_to_host(losses.data(), acts_->losses);
  double sum = 0.0;
  for (float loss : losses) sum += loss;
  logits_valid_ = true;
  backward_pending_ = true;
  return static_cast<float>(sum / static_cast<double>(losses.size()));
}

void Gpt::forward(const Tensor& params, const Tensor& tokens) {
  check_params("Gpt::forward", params);
  prepare_forward(tokens, nullptr);
  logits_valid_ = false;
  backward_pending_ = false;
  FlatModelWeights weights(params, Tensor());
  run_forward(weights);
  logits_valid_ = true;
}

Tensor Gpt::logits() const {
  MIXTRAIN_CHECK_ARG(logits_valid_,
                     "Gpt::logits: no forward has run since the model was made or since a "
                     "backward overwrote the logits with their gradient");
  return acts_->logits;
}

void Gpt::backward(ModelWeights& weights, float dloss) {
  MIXTRAIN_CHECK_ARG(backward_pending_,
                     "Gpt::backward: needs a forward with targets since the last backward");
  if (!grad_acts_ || grad_acts_->batch != acts_->batch || grad_acts_->seq != acts_->seq) {
    grad_acts_ = std::make_unique<GptActivationGrads>(backend_, config_, compute_dtype_,
                                                      acts_->batch, acts_->seq);
  }
  backward_pending_ = false;
  logits_valid_ = false;  // the backward writes dlogits over the logits
  const double positions = static_cast<double>(acts_->batch * acts_->seq);
  run_backward(weights, static_cast<float>(dloss / positions));
}

}  // namespace mixtrain
