// Why: writing and restoring a trainer's checkpoint (format in trainer.h),
// so that a resumed run continues exactly where the saved one stopped.
// The optimizer state is gathered from every rank into the plain layout
// and rank 0 writes it, so a checkpoint loads at any world size and stage.
#include <cstring>

#include "checkpoint/checkpoint_store.h"
#include "common/error.h"
#include "train/trainer.h"
#include "train/trainer_checkpoint_files.h"
#include "zero/padded_weights.h"

namespace mixtrain {

void Trainer::write_checkpoint() {
  state_.scaler = scaler_.state();
  state_.sampler = sampler_.state();
  const ParameterLayout& layout = gpt_.layout();
  const std::vector<float> master =
      unpadded_weights(layout, zero_.gather(ZeroEngine::State::kMaster));
  const std::vector<float> adam_m =
      unpadded_weights(layout, zero_.gather(ZeroEngine::State::kAdamM));
  const std::vector<float> adam_v =
      unpadded_weights(layout, zero_.gather(ZeroEngine::State::kAdamV));
  if (zero_.rank() == 0) {
    const Shape flat{layout.param_count()};
    CheckpointFiles files;
    files[kTrainerDataFileName] = {
        HostTensor{{kMasterTensorName, DType::kF32, flat}, master.data()},
        HostTensor{{kAdamMTensorName, DType::kF32, flat}, adam_m.data()},
        HostTensor{{kAdamVTensorName, DType::kF32, flat}, adam_v.data()}};
    save_checkpoint(checkpoint_dir_, state_.step, files, trainer_state_to_json(state_));
    retain_checkpoints(checkpoint_dir_, static_cast<size_t>(spec_.checkpoint.keep));
  }
  last_checkpoint_step_ = state_.step;
}

void Trainer::restore_checkpoint(const std::filesystem::path& resume_dir) {
  const std::filesystem::path path = resolve_checkpoint(resume_dir);
  const LoadedCheckpoint checkpoint = load_checkpoint(path);
  TrainerState restored = trainer_state_from_json(checkpoint.state, path.string());
  check_resumable(restored, gpt_.config(), spec_.precision.compute, path.string());
  MIXTRAIN_CHECK_ARG(restored.sampler.seed == static_cast<uint64_t>(spec_.train.seed),
                     path.string() +
                         ": cannot resume: the checkpoint was trained with "
                         "train.seed " +
                         std::to_string(restored.sampler.seed) + " but the job spec has " +
                         std::to_string(spec_.train.seed));
  const SafetensorsFile& file = checkpoint.file(kTrainerDataFileName);
  const ParameterLayout& layout = gpt_.layout();
  const int64_t count = layout.param_count();
  zero_.load(ZeroEngine::State::kMaster,
             padded_weights(layout, read_flat_fp32(file, kMasterTensorName, count)));
  zero_.load(ZeroEngine::State::kAdamM,
             padded_weights(layout, read_flat_fp32(file, kAdamMTensorName, count)));
  zero_.load(ZeroEngine::State::kAdamV,
             padded_weights(layout, read_flat_fp32(file, kAdamVTensorName, count)));
  zero_.refresh_weights();
  scaler_.restore(restored.scaler);
  sampler_.restore(restored.sampler);
  state_ = restored;
  last_checkpoint_step_ = state_.step;
}

}  // namespace mixtrain
