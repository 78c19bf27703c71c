// Why: the single-process mixed-precision training loop of a job spec: it
// owns the flat model state on a Backend, draws batches, runs GPT forward
// and backward, and applies loss scaling, clipping and AdamW, with periodic
// evaluation and checkpoints that resume bit for bit.
//
// State on the backend (all MemoryPool::kDevice, each one flat buffer in
// ParameterLayout order):
//   master   fp32                                  kMasterParams
//   params   compute dtype working copy            kParams (for fp32 compute
//            the master tensor itself: no second copy)
//   grads    compute dtype, or fp32 with grads_fp32 kGrads
//   adam_m, adam_v  fp32                           kOptimizerState
//
// One step is forward -> backward (per micro-batch) -> reduce -> overflow
// check -> clip -> optimizer, each a private stage taking the flat buffers,
// so that ZeRO can partition stages without reshaping the loop.
//
// Checkpoints (checkpoint store, into checkpoint_dir()) hold one data file
// "trainer.safetensors" with three flat fp32 tensors of param_count elements
// in ParameterLayout order: "master", "adam_m", "adam_v" (our layout: linear
// weights are (out, in)); the working copy is re-derived from master. The
// state JSON is trainer_state.h's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amp/loss_scaler.h"
#include "backend/backend.h"
#include "config/job_spec.h"
#include "data/batch_sampler.h"
#include "data/eval_batch_stream.h"
#include "data/train_val_split.h"
#include "model/gpt.h"
#include "optim/lr_schedule.h"
#include "optim/adamw.h"
#include "train/progress.h"
#include "train/train_summary.h"
#include "train/trainer_state.h"

namespace mixtrain {

struct TrainerOptions {
  // Accumulate gradients in fp32 whatever the compute dtype.
  bool grads_fp32 = false;
  // Where checkpoints go; unset: effective_checkpoint_dir(spec).
  std::optional<std::filesystem::path> checkpoint_dir;
  // Resume from this checkpoint directory (one holding manifest.json), or
  // from the newest complete checkpoint in this directory of checkpoints.
  std::optional<std::filesystem::path> resume_dir;
  TrainerProgress progress;
};

class Trainer {
 public:
  // Validates `spec` (config::validate; every problem in one message),
  // loads its data, allocates the state on `backend` (which must outlive
  // the trainer) and either restores the checkpoint options.resume_dir
  // names or initializes the weights: from the HF safetensors file
  // model.init_from (import_hf_safetensors) when set, else with
  // gpt2_init(train.seed). Throws EngineError(kInvalidArgument) for an
  // invalid spec, a spec this trainer cannot run (resources.workers != 1,
  // CPU offload), an init_from file that does not fit the model, data
  // errors, no checkpoint in resume_dir, or a checkpoint written for another
  // model shape or compute dtype (naming both).
  Trainer(Backend& backend, config::JobSpec spec, TrainerOptions options = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains from step() to train.steps: evaluates after every eval_every-th
  // step and at the end, checkpoints after every checkpoint.every-th step
  // and at the end (keeping checkpoint.keep), and returns the summary
  // (status "succeeded"). Errors propagate as EngineError; in particular a
  // loss scale stuck at min_scale with on_min_scale: fail throws
  // kFailedPrecondition. Calling it again after it returned trains nothing
  // more and returns the summary again.
  TrainSummary run();

  // Steps done so far (applied and skipped), counting resumed ones.
  int64_t step() const { return state_.step; }
  // The summary of the run so far, with `status`.
  TrainSummary summary(const std::string& status) const;
  // The flat fp32 master weights (ParameterLayout order).
  const Tensor& master_weights() const { return master_; }
  const ParameterLayout& layout() const { return gpt_.layout(); }
  const std::filesystem::path& checkpoint_dir() const { return checkpoint_dir_; }

 private:
  struct GradClip {
    double norm = 0.0;         // global L2 norm of the unscaled gradients
    float coefficient = 1.0f;  // factor that clips them to train.grad_clip
  };

  // ---- one training step (trainer_step.cc) ------------------------------
  // Runs one step end to end and advances state_.
  StepProgress train_step();
  void zero_gradients(const Tensor& grads);
  // Copies the batch's ids into the token buffers and returns the mean loss.
  float forward(const Tensor& params, const TokenBatch& batch);
  // Adds d(dloss * loss)/d(params) of the last forward into grads.
  void backward(const Tensor& params, const Tensor& grads, float dloss);
  // Where data-parallel ranks all-reduce (ZeRO: reduce-scatter) the
  // gradients; with world size 1 they are already the global sum.
  void reduce_gradients(const Tensor& grads);
  // Reports the first parameter whose (still scaled) gradient holds inf/NaN.
  // Gradients stay scaled until the optimizer unscales them in fp32:
  // unscaling fp16 gradients in place would flush to zero the very values
  // below 2^-24 that loss scaling kept.
  NonFiniteCheck check_gradients(const Tensor& grads);
  // The unscaled global norm of grads (which carry loss_scale) and the clip factor.
  GradClip clip(const Tensor& grads, float loss_scale);
  // AdamW on every parameter, each gradient multiplied by grad_scale (the
  // clip factor over the loss scale) in fp32; `working` receives the
  // weights in the compute dtype unless it is the master tensor itself.
  void optimizer_step(const Tensor& master, const Tensor& m, const Tensor& v, const Tensor& grads,
                      const Tensor& working, float lr, float grad_scale);

  // ---- evaluation and checkpoints ---------------------------------------
  double evaluate();
  void run_evaluation();
  void write_checkpoint();  // trainer_checkpoint.cc
  void restore_checkpoint(const std::filesystem::path& resume_dir);  // trainer_checkpoint.cc

  Backend& backend_;
  config::JobSpec spec_;
  TrainerOptions options_;
  std::filesystem::path checkpoint_dir_;
  Gpt gpt_;
  TrainValTokens data_;
  BatchSampler sampler_;
  std::optional<EvalBatchStream> eval_stream_;  // unset when train.eval_batches is 0
  LrSchedule lr_schedule_;
  LossScaler scaler_;
  AdamWHyper adamw_hyper_;
  std::vector<std::string> parameter_names_;  // layout order, for overflow messages

  Tensor master_;
  Tensor params_;  // == master_ for fp32 compute
  Tensor grads_;
  Tensor adam_m_;
  Tensor adam_v_;
  Tensor tokens_;   // (B,T) int32, host-readable
  Tensor targets_;  // (B,T) int32, host-readable

  // state_.scaler and state_.sampler are refreshed from scaler_ and
  // sampler_ when a checkpoint is written; the other fields are live.
  TrainerState state_;
  std::optional<int64_t> last_checkpoint_step_;
  std::optional<int64_t> last_eval_step_;
  double train_tokens_ = 0.0;   // trained in this process
  double train_seconds_ = 0.0;  // wall time of those steps
};

}  // namespace mixtrain
