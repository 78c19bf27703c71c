// Why: the mixed-precision training loop of a job spec on one rank of a
// data-parallel group (or alone): it draws this rank's part of every
// global batch, runs GPT forward and backward, and applies loss scaling,
// clipping and AdamW, with periodic evaluation and checkpoints that resume
// bit for bit. The model state lives in a ZeroEngine, placed and
// partitioned as zero.stage and the offload settings say.
//
// One step is forward -> backward (per micro-batch; the engine reduces
// gradients as backward releases each unit) -> overflow check (agreed by
// every rank) -> clip (global norm) -> optimizer (this rank's partition,
// then the working weights gathered). With compute fp8 the step's amaxes
// are reduced over the ranks (max) and the recipe updated after backward.
//
// Checkpoints (checkpoint store, into checkpoint_dir()) are sharded: every
// rank that owns optimizer state (stage 0: rank 0 alone) writes its fp32
// "master", "adam_m" and "adam_v" values, in the plain ParameterLayout
// order (our layout: linear weights are (out, in)), as one shard file of
// the checkpoint rank 0 builds and commits (trainer_checkpoint_files.h has
// the layout); the working copy is re-derived from master. The state JSON
// is trainer_state.h's; compute fp8 adds the recipe's state (the same on
// every rank) as rank 0's file "fp8_recipe.safetensors". A checkpoint written by N ranks at any
// stage resumes at any world size and stage: each rank copies its own segments out of whichever
// shards hold them.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/amp/fp8_recipe.h"
#include "engine/amp/loss_scaler.h"
#include "engine/backend/backend.h"
#include "engine/comm/communicator.h"
#include "engine/config/job_spec.h"
#include "engine/data/batch_sampler.h"
#include "engine/data/eval_batch_stream.h"
#include "engine/data/train_val_split.h"
#include "engine/model/model.h"
#include "engine/optim/adamw.h"
#include "engine/optim/lr_schedule.h"
#include "engine/train/progress.h"
#include "engine/train/train_summary.h"
#include "engine/train/trainer_state.h"
#include "engine/zero/zero_engine.h"

namespace mixtrain {

struct TrainerOptions {
  // Accumulate gradients in fp32 whatever the compute dtype.
  bool grads_fp32 = false;
  // Where checkpoints go; unset: effective_checkpoint_dir(spec).
  std::optional<std::filesystem::path> checkpoint_dir;
  // Resume from this checkpoint directory (one holding manifest.json), or
  // from the newest checkpoint in this directory of checkpoints that
  // verifies (open_resume_checkpoint: damaged newer ones are passed over).
  std::optional<std::filesystem::path> resume_dir;
  // The attempt writing checkpoints, for a job the coordinator may restart
  // while a superseded rank still runs: >= 1 commits and prunes only while
  // no newer attempt claimed checkpoint_dir (checkpoint_fence.h); 0: no
  // fencing (one `mixtrain train` run).
  int64_t checkpoint_epoch = 0;
  // The directory the job's input files (data, model.init_from) must lie
  // beneath, checked when each is opened (common/contained_open.h; relative
  // paths resolve there); unset: they are opened as the spec names them.
  std::optional<std::filesystem::path> data_root;
  // This rank's communicator; null: one rank. Must outlive the trainer.
  Communicator* comm = nullptr;
  TrainerProgress progress;
  // Set (by another thread or a signal handler) to stop the run early, as
  // a preempted job does: after each step the ranks agree whether any was
  // asked (one scalar all-reduce per step, only when this is given), so
  // all stop after the same step; run() then checkpoints that step and
  // returns with status "preempted". Must outlive the trainer.
  const std::atomic<bool>* stop_requested = nullptr;
};

class Trainer {
 public:
  // Validates `spec` (config::validate; every problem in one message),
  // loads its data, allocates the state on `backend` (which must outlive
  // the trainer) and either restores the checkpoint options.resume_dir
  // names or initializes the weights: from the HF safetensors file
  // model.init_from (import_hf_safetensors) when set, else with
  // gpt2_init(train.seed). Throws EngineError(kInvalidArgument) for an
  // invalid spec, a spec this backend cannot run (CPU offload on a GPU
  // backend), an init_from file that does not fit the model, data
  // errors, a data or init_from file outside options.data_root, no
  // checkpoint in resume_dir that verifies, or a checkpoint written for
  // another model shape or compute dtype (naming both).
  Trainer(Backend& backend, config::JobSpec spec, TrainerOptions options = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains from step() to train.steps: evaluates after every eval_every-th
  // step and at the end, checkpoints after every checkpoint.every-th step
  // and at the end (keeping checkpoint.keep), and returns the summary
  // (status "succeeded"), or stops early when options.stop_requested says
  // so (status "preempted", a checkpoint of its last step written). Errors
  // propagate as EngineError; in particular a
  // loss scale stuck at min_scale with on_min_scale: fail throws
  // kFailedPrecondition. Calling it again after it returned trains nothing
  // more and returns the summary again.
  TrainSummary run();

  // Steps done so far (applied and skipped), counting resumed ones.
  int64_t step() const { return state_.step; }
  // The summary of the run so far, with `status`.
  TrainSummary summary(const std::string& status) const;
  // The fp32 master weights of the whole model in ParameterLayout(config)
  // order, gathered from every rank (a collective: every rank must call it).
  std::vector<float> master_weights();
  // The model's layout (padded for the world size).
  const ParameterLayout& layout() const { return model_->layout(); }
  const std::filesystem::path& checkpoint_dir() const { return checkpoint_dir_; }

 private:
  struct GradClip {
    double norm = 0.0;         // global L2 norm of the unscaled gradients
    float coefficient = 1.0f;  // factor that clips them to train.grad_clip
  };

  // ---- one training step (trainer_step.cc) ------------------------------
  // Runs one step end to end and advances state_.
  StepProgress train_step();
  // Copies the batch's ids into the token buffers and returns the mean
  // loss of a forward through `weights`.
  float forward(ModelWeights& weights, const TokenBatch& batch);
  // The mean of `local` (this rank's loss) over the ranks.
  double mean_over_ranks(double local);
  GradClip clip(float loss_scale);

  // True when this or another rank was asked to stop (a collective when
  // options_.stop_requested is set; false without it).
  bool stop_agreed();

  // ---- evaluation ---------------------------------------------------------
  double evaluate();
  void run_evaluation();

  // ---- checkpoints (trainer_checkpoint.cc) ------------------------------
  // Int32 words that a rank reports in each agreement of a checkpoint.
  static constexpr size_t kCheckpointWords = 3;
  using CheckpointWords = std::array<int32_t, kCheckpointWords>;
  // Runs `work` on this rank if `active` (the others contribute zeros),
  // then every rank learns every rank's words and whether it succeeded (a
  // collective; without a communicator just this rank's). Rethrows this
  // rank's error, or throws EngineError(kInternal) naming the first rank
  // whose `work` failed to `what`; returns the words by rank.
  std::vector<CheckpointWords> agree_on_checkpoint(const std::string& what, bool active,
                                                   const std::function<CheckpointWords()>& work);
  void write_checkpoint();
  // Restores the checkpoint that open_resume_checkpoint finds in
  // `resume_dir`, logging each damaged one it passes over and the one used.
  void restore_checkpoint(const std::filesystem::path& resume_dir);

  // Hands `line` to options_.progress.on_log, if set.
  void log(const std::string& line) const;

  Backend& backend_;
  config::JobSpec spec_;
  TrainerOptions options_;
  std::filesystem::path checkpoint_dir_;
  std::unique_ptr<Model> model_;
  // Compute fp8: the scaling state and the GEMMs that use it (the model
  // runs its linear layers through fp8_linear_, and never touches it
  // again once the passes are done); null otherwise.
  std::unique_ptr<Fp8Recipe> fp8_recipe_;
  std::unique_ptr<Fp8Linear> fp8_linear_;
  TrainValTokens data_;
  BatchSampler sampler_;
  std::optional<EvalBatchStream> eval_stream_;  // unset when train.eval_batches is 0
  LrSchedule lr_schedule_;
  LossScaler scaler_;
  AdamWConfig adamw_config_;
  std::vector<std::string> parameter_names_;  // layout order, for overflow messages

  ZeroEngine zero_;
  Tensor tokens_;   // (B,T) int32, host-readable
  Tensor targets_;  // (B,T) int32, host-readable

  // state_.scaler and state_.sampler are refreshed from scaler_ and
  // sampler_ when a checkpoint is written; the other fields are live.
  TrainerState state_;
  std::optional<int64_t> last_checkpoint_step_;
  std::optional<int64_t> last_eval_step_;
  std::optional<GradientRange> last_gradient_range_;  // for the summary
  double train_tokens_ = 0.0;   // trained in this process
  double train_seconds_ = 0.0;  // wall time of those steps
  int64_t train_steps_ = 0;     // steps done in this process
  int64_t comm_elements_ = 0;   // elements this rank sent during those steps
  int64_t comm_bytes_ = 0;
};

}  // namespace mixtrain
