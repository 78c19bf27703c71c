// Why: writing and restoring a trainer's checkpoint (format in trainer.h),
// so that a resumed run continues exactly where the saved one stopped.
#include "train/trainer.h"

#include <cstring>

#include "checkpoint/checkpoint_store.h"
#include "common/error.h"
#include "train/trainer_checkpoint_files.h"

namespace mixtrain {

namespace {

// `tensor`'s elements copied to host memory.
std::vector<float> to_host(Backend& backend, const Tensor& tensor) {
  std::vector<float> out(static_cast<size_t>(tensor.numel()));
  backend.copy_to_host(out.data(), tensor);
  return out;
}

// Copies the flat fp32 tensor `name` of `file` into `destination`.
void read_flat(const SafetensorsFile& file, const char* name, Backend& backend,
               const Tensor& destination) {
  const std::vector<float> host = read_flat_fp32(file, name, destination.numel());
  backend.copy_from_host(destination, host.data());
}

}  // namespace

void Trainer::write_checkpoint() {
  state_.scaler = scaler_.state();
  state_.sampler = sampler_.state();
  const std::vector<float> master = to_host(backend_, master_);
  const std::vector<float> adam_m = to_host(backend_, adam_m_);
  const std::vector<float> adam_v = to_host(backend_, adam_v_);
  const Shape flat{gpt_.layout().numel()};
  CheckpointFiles files;
  files[kTrainerDataFileName] = {HostTensor{{kMasterTensorName, DType::kF32, flat}, master.data()},
                          HostTensor{{kAdamMTensorName, DType::kF32, flat}, adam_m.data()},
                          HostTensor{{kAdamVTensorName, DType::kF32, flat}, adam_v.data()}};
  save_checkpoint(checkpoint_dir_, state_.step, files, trainer_state_to_json(state_));
  retain_checkpoints(checkpoint_dir_, static_cast<size_t>(spec_.checkpoint.keep));
  last_checkpoint_step_ = state_.step;
}

void Trainer::restore_checkpoint(const std::filesystem::path& resume_dir) {
  const std::filesystem::path path = resolve_checkpoint(resume_dir);
  const LoadedCheckpoint checkpoint = load_checkpoint(path);
  TrainerState restored = trainer_state_from_json(checkpoint.state, path.string());
  check_resumable(restored, gpt_.config(), spec_.precision.compute, path.string());
  MIXTRAIN_CHECK_ARG(restored.sampler.seed == static_cast<uint64_t>(spec_.train.seed),
                     path.string() + ": cannot resume: the checkpoint was trained with "
                                     "train.seed " +
                         std::to_string(restored.sampler.seed) + " but the job spec has " +
                         std::to_string(spec_.train.seed));
  const SafetensorsFile& file = checkpoint.file(kTrainerDataFileName);
  read_flat(file, kMasterTensorName, backend_, master_);
  read_flat(file, kAdamMTensorName, backend_, adam_m_);
  read_flat(file, kAdamVTensorName, backend_, adam_v_);
  backend_.cast(params_, master_);
  scaler_.restore(restored.scaler);
  sampler_.restore(restored.sampler);
  state_ = restored;
  last_checkpoint_step_ = state_.step;
}

}  // namespace mixtrain
