// Why: building a trainer from a job spec (checks, data, state on the
// backend), the run loop with its evaluation and checkpoint cadence, and
// the summary.
#include "engine/train/trainer.h"

#include <algorithm>
#include <utility>

#include "engine/common/error.h"
#include "engine/model/gpt_init.h"
#include "engine/model/hf_safetensors.h"
#include "engine/train/loss_scaler_from_spec.h"
#include "engine/zero/padded_weights.h"

namespace mixtrain {

namespace {

// `spec` if it is valid and leaves nothing `auto`; throws
// EngineError(kInvalidArgument) naming every problem otherwise.
config::JobSpec checked_spec(config::JobSpec spec) {
  if (spec.auto_keys.any()) {
    throw EngineError(ErrorCode::kInvalidArgument,
                      config::auto_key_names(spec.auto_keys) +
                          " is auto: the coordinator or `mixtrain train` chooses it before a "
                          "trainer starts");
  }
  const std::vector<config::SpecError> errors = config::validate(spec);
  if (!errors.empty()) {
    std::string message = "invalid job spec:";
    for (const config::SpecError& error : errors)
      message += " " + error.key_path + ": " + error.message + ";";
    message.pop_back();
    throw EngineError(ErrorCode::kInvalidArgument, message);
  }
  return spec;
}

int world_size(const Communicator* comm) { return comm ? comm->world_size() : 1; }

SamplerConfig sampler_config(const config::JobSpec& spec, const Communicator* comm) {
  SamplerConfig out;
  out.micro_batch = spec.train.micro_batch;
  out.seq_len = spec.model.seq_len;
  out.grad_accum = spec.train.grad_accum;
  out.world_size = world_size(comm);
  out.rank = comm ? comm->rank() : 0;
  out.seed = static_cast<uint64_t>(spec.train.seed);
  return out;
}

LrScheduleConfig lr_config(const config::TrainSpec& train) {
  return LrScheduleConfig{train.lr, train.min_lr, train.warmup_steps, train.steps};
}

AdamWConfig adamw_config(const config::TrainSpec& train) {
  AdamWConfig out;
  out.lr = static_cast<float>(train.lr);
  out.beta1 = static_cast<float>(train.betas[0]);
  out.beta2 = static_cast<float>(train.betas[1]);
  out.weight_decay = static_cast<float>(train.weight_decay);
  return out;
}

// The recipe of a compute fp8 spec for `model`'s GEMMs, else null.
std::unique_ptr<Fp8Recipe> make_fp8_recipe(const config::JobSpec& spec, const Model& model) {
  if (!config::is_fp8_compute(spec.precision)) return nullptr;
  const config::Fp8Spec fp8 = config::effective_fp8(spec.precision);
  return std::make_unique<Fp8Recipe>(fp8_recipe_settings(fp8),
                                     model.fp8_gemm_count(!fp8.skip_first_last));
}

// The pool Model::forward can read token ids from on the host.
MemoryPool host_readable_pool(const Backend& backend) {
  return backend.device_type() == DeviceType::kCpu ? MemoryPool::kDevice : MemoryPool::kHost;
}

}  // namespace

Trainer::Trainer(Backend& backend, config::JobSpec spec, TrainerOptions options)
    : backend_(backend),
      spec_(checked_spec(std::move(spec))),
      options_(std::move(options)),
      checkpoint_dir_(options_.checkpoint_dir.value_or(config::effective_checkpoint_dir(spec_))),
      model_(make_model(backend_, gpt_config(spec_.model), config::model_dtype(spec_.precision),
                        options_.grads_fp32 ? DType::kF32 : config::model_dtype(spec_.precision),
                        world_size(options_.comm), spec_.train.activation_checkpointing)),
      fp8_recipe_(make_fp8_recipe(spec_, *model_)),
      fp8_linear_(fp8_recipe_ ? std::make_unique<Fp8Linear>(backend_, *fp8_recipe_) : nullptr),
      data_(load_train_val(spec_.data, spec_.model.vocab, spec_.model.seq_len, backend_.memory(),
                           options_.data_root)),
      sampler_(data_.train, sampler_config(spec_, options_.comm)),
      lr_schedule_(lr_config(spec_.train)),
      scaler_(loss_scaler_config(spec_.precision)),
      adamw_config_(adamw_config(spec_.train)),
      zero_(backend_, *model_, options_.comm, zero_settings(spec_.zero)) {
  // Every rank evaluates the same batches (stage 3 needs every rank in
  // each gather), so the eval stream ignores the rank.
  if (spec_.train.eval_batches > 0)
    eval_stream_.emplace(data_.val, sampler_config(spec_, nullptr), spec_.train.eval_batches);
  const ParameterLayout& layout = model_->layout();
  for (const ParameterInfo& info : layout.parameters()) parameter_names_.push_back(info.name);

  backend_.allow_tf32(spec_.precision.tf32);
  if (fp8_linear_) {
    const DType codes[] = {DType::kFP8E4M3, DType::kFP8E4M3, spec_.precision.compute};
    if (const OpSupport fp8 = backend_.supports(BackendOp::kMatmulFp8, codes); !fp8.supported)
      throw EngineError(ErrorCode::kInvalidArgument, "precision.compute fp8: " + fp8.reason);
    model_->set_fp8(fp8_linear_.get(), !config::effective_fp8(spec_.precision).skip_first_last);
  }
  const DType compute = spec_.precision.compute;
  const Shape batch{spec_.train.micro_batch, spec_.model.seq_len};
  tokens_ = backend_.empty(batch, DType::kI32, MemoryCategory::kActivations,
                           host_readable_pool(backend_));
  targets_ = backend_.empty(batch, DType::kI32, MemoryCategory::kActivations,
                            host_readable_pool(backend_));

  state_.model = model_->config();
  state_.compute_dtype = compute;
  if (options_.resume_dir) {
    restore_checkpoint(*options_.resume_dir);
  } else {
    const std::vector<float> initial =
        spec_.model.init_from
            ? padded_weights(layout, import_hf_safetensors(*spec_.model.init_from, model_->config(),
                                                           options_.data_root))
            : gpt2_init(layout, model_->config(), static_cast<uint64_t>(spec_.train.seed));
    zero_.load(ZeroEngine::State::kMaster, initial);
    zero_.refresh_weights();
  }
}

Trainer::~Trainer() = default;

void Trainer::log(const std::string& line) const {
  if (options_.progress.on_log) options_.progress.on_log(line);
}

TrainSummary Trainer::run() {
  const int64_t total = spec_.train.steps;
  while (state_.step < total) {
    const StepProgress progress = train_step();
    if (options_.progress.on_step) options_.progress.on_step(progress);
    if (eval_stream_ && state_.step % spec_.train.eval_every == 0) run_evaluation();
    if (state_.step % spec_.checkpoint.every == 0) write_checkpoint();
    if (state_.step < total && stop_agreed()) {
      if (last_checkpoint_step_ != state_.step) write_checkpoint();
      return summary("preempted");
    }
  }
  if (eval_stream_ && last_eval_step_ != state_.step) run_evaluation();
  if (last_checkpoint_step_ != state_.step) write_checkpoint();
  return summary("succeeded");
}

bool Trainer::stop_agreed() {
  if (options_.stop_requested == nullptr) return false;
  const float mine = options_.stop_requested->load() ? 1.0f : 0.0f;
  return (options_.comm == nullptr ? mine : zero_.all_reduce_scalar(mine, ReduceOp::kMax)) > 0.0f;
}

double Trainer::evaluate() {
  double sum = 0.0;
  const int64_t batches = eval_stream_->num_batches();
  for (int64_t i = 0; i < batches; ++i) {
    sum += forward(zero_.eval_weights(), eval_stream_->batch(i));
    if (options_.progress.on_eval_batch)
      options_.progress.on_eval_batch(EvalBatchProgress{state_.step, i + 1, batches});
  }
  return sum / static_cast<double>(batches);
}

void Trainer::run_evaluation() {
  const double val_loss = evaluate();
  state_.last_val_loss = val_loss;
  last_eval_step_ = state_.step;
  if (options_.progress.on_eval) options_.progress.on_eval(EvalProgress{state_.step, val_loss});
}

TrainSummary Trainer::summary(const std::string& status) const {
  TrainSummary out;
  out.name = spec_.name;
  out.status = status;
  out.steps = state_.step;
  out.skipped_steps = scaler_.overflow_steps();
  out.world_size = zero_.world_size();
  out.zero_stage = spec_.zero.stage;
  out.compute_dtype = config::compute_dtype_name(spec_.precision.compute);
  out.param_count = model_->layout().param_count();
  out.tokens_per_second = train_seconds_ > 0.0 ? train_tokens_ / train_seconds_ : 0.0;
  out.final_train_loss = state_.last_train_loss;
  out.final_val_loss = state_.last_val_loss;
  out.loss_scale = scaler_.scale();
  out.nonfinite_events = state_.nan_events + state_.inf_events;
  const int64_t steps = std::max<int64_t>(train_steps_, 1);
  RankSummary& rank = out.ranks.emplace_back(
      RankSummary{zero_.rank(), memory_peaks(backend_.memory()), comm_elements_ / steps,
                  comm_bytes_ / steps, last_gradient_range_});
  if (fp8_recipe_) {
    rank.fp8_saturated.emplace();
    for (int k = 0; k < kFp8TensorKinds; ++k)
      (*rank.fp8_saturated)[static_cast<size_t>(k)] =
          fp8_recipe_->stats(static_cast<Fp8TensorKind>(k)).saturated;
  }
  return out;
}

std::vector<float> Trainer::master_weights() {
  return unpadded_weights(model_->layout(), zero_.gather(ZeroEngine::State::kMaster));
}

}  // namespace mixtrain
