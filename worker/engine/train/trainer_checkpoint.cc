// Why: writing and restoring a trainer's checkpoint (format in trainer.h),
// so that a resumed run continues exactly where the saved one stopped.
#include "train/trainer.h"

#include <cstring>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/manifest.h"
#include "common/error.h"

namespace mixtrain {

namespace {

constexpr const char* kDataFileName = "trainer.safetensors";
constexpr const char* kMasterName = "master";
constexpr const char* kAdamMName = "adam_m";
constexpr const char* kAdamVName = "adam_v";

// `tensor`'s elements copied to host memory.
std::vector<float> to_host(Backend& backend, const Tensor& tensor) {
  std::vector<float> out(static_cast<size_t>(tensor.numel()));
  backend.copy_to_host(out.data(), tensor);
  return out;
}

// Copies the flat fp32 tensor `name` of `file` into `destination`, after
// checking its dtype and size.
void read_flat(const SafetensorsFile& file, const char* name, Backend& backend,
               const Tensor& destination) {
  const SafetensorsEntry* entry = file.find(name);
  MIXTRAIN_CHECK_ARG(entry != nullptr,
                     file.path().string() + ": checkpoint lacks tensor \"" + name + "\"");
  MIXTRAIN_CHECK_ARG(entry->layout.dtype == DType::kF32 &&
                         entry->layout.shape == destination.shape(),
                     file.path().string() + ": tensor \"" + name + "\" is " +
                         dtype_name(entry->layout.dtype) + shape_string(entry->layout.shape) +
                         ", expected " + destination.describe());
  // The file's bytes may be unaligned: copy them to aligned memory first.
  const std::span<const std::byte> bytes = file.bytes(*entry);
  std::vector<float> host(static_cast<size_t>(destination.numel()));
  std::memcpy(host.data(), bytes.data(), bytes.size());
  backend.copy_from_host(destination, host.data());
}

// The checkpoint directory `resume_dir` names: itself when it holds a
// manifest, else the newest complete checkpoint inside it.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& resume_dir) {
  if (std::filesystem::exists(resume_dir / kManifestFileName)) return resume_dir;
  const std::optional<CheckpointInfo> latest = latest_checkpoint(resume_dir);
  MIXTRAIN_CHECK_ARG(latest.has_value(), "resume: no complete checkpoint in " +
                                             resume_dir.string() +
                                             " (expected a step_NNNNNNNN directory with " +
                                             std::string(kManifestFileName) + ", or one itself)");
  return latest->path;
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
  files[kDataFileName] = {HostTensor{{kMasterName, DType::kF32, flat}, master.data()},
                          HostTensor{{kAdamMName, DType::kF32, flat}, adam_m.data()},
                          HostTensor{{kAdamVName, DType::kF32, flat}, adam_v.data()}};
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
  const SafetensorsFile& file = checkpoint.file(kDataFileName);
  read_flat(file, kMasterName, backend_, master_);
  read_flat(file, kAdamMName, backend_, adam_m_);
  read_flat(file, kAdamVName, backend_, adam_v_);
  backend_.cast(params_, master_);
  scaler_.restore(restored.scaler);
  sampler_.restore(restored.sampler);
  state_ = restored;
  last_checkpoint_step_ = state_.step;
}

}  // namespace mixtrain
