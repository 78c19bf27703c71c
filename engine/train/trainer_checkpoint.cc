// Why: writing and restoring a trainer's checkpoint (format in trainer.h and
// trainer_checkpoint_files.h), so that a resumed run continues where the
// saved one stopped, at any world size and ZeRO stage. No rank ever holds
// more optimizer state than its own: each owner writes its shard into the
// temporary directory rank 0 began, and rank 0 commits the checkpoint once
// every rank reported its shard's size and checksum. Every rank agrees on
// the outcome of each of these steps, so a failure on any rank fails the
// write on all of them and leaves no checkpoint.
#include <algorithm>
#include <exception>

#include "engine/checkpoint/checkpoint_fence.h"
#include "engine/checkpoint/checkpoint_store.h"
#include "engine/common/error.h"
#include "engine/model/hf_safetensors.h"
#include "engine/train/trainer.h"
#include "engine/train/trainer_checkpoint_files.h"

namespace mixtrain {
namespace {

struct StateTensor {
  ZeroEngine::State which;
  const char* name;
};
constexpr StateTensor kStateTensors[] = {{ZeroEngine::State::kMaster, kMasterTensorName},
                                         {ZeroEngine::State::kAdamM, kAdamMTensorName},
                                         {ZeroEngine::State::kAdamV, kAdamVTensorName}};

// A written file's size and CRC32C as three int32 words, and back.
std::array<int32_t, 3> file_words(const ManifestFile& file) {
  return {static_cast<int32_t>(file.bytes & 0xffffffffu), static_cast<int32_t>(file.bytes >> 32),
          static_cast<int32_t>(file.crc32c)};
}

ManifestFile file_from_words(std::string name, const std::array<int32_t, 3>& words) {
  const uint64_t low = static_cast<uint32_t>(words[0]);
  const uint64_t high = static_cast<uint32_t>(words[1]);
  return ManifestFile{std::move(name), low | high << 32, static_cast<uint32_t>(words[2])};
}

}  // namespace

std::vector<Trainer::CheckpointWords> Trainer::agree_on_checkpoint(
    const std::string& what, bool active, const std::function<CheckpointWords()>& work) {
  std::exception_ptr error;
  std::array<int32_t, kCheckpointWords + 1> mine{1};  // succeeded, then the words
  if (active) {
    try {
      const CheckpointWords words = work();
      std::copy(words.begin(), words.end(), mine.begin() + 1);
    } catch (...) {
      error = std::current_exception();
      mine[0] = 0;
    }
  }
  const size_t ranks = static_cast<size_t>(zero_.world_size());
  std::vector<int32_t> all(mine.begin(), mine.end());
  if (options_.comm != nullptr) {
    all.resize(mine.size() * ranks);
    const Tensor in = backend_.empty({static_cast<int64_t>(mine.size())}, DType::kI32,
                                     MemoryCategory::kCommBuffers);
    const Tensor out = backend_.empty({static_cast<int64_t>(all.size())}, DType::kI32,
                                      MemoryCategory::kCommBuffers);
    backend_.copy_from_host(in, mine.data());
    options_.comm->all_gather(in, out);
    backend_.copy_to_host(all.data(), out);
  }
  if (error) std::rethrow_exception(error);
  std::vector<CheckpointWords> words(ranks);
  for (size_t r = 0; r < ranks; ++r) {
    const int32_t* reported = all.data() + r * mine.size();
    if (reported[0] == 0) {
      throw EngineError(ErrorCode::kInternal, "checkpoint step " + std::to_string(state_.step) +
                                                  ": rank " + std::to_string(r) + " failed to " +
                                                  what + " (its log says why)");
    }
    std::copy_n(reported + 1, kCheckpointWords, words[r].begin());
  }
  return words;
}

void Trainer::write_checkpoint() {
  state_.scaler = scaler_.state();
  state_.sampler = sampler_.state();
  const bool leader = zero_.rank() == 0;
  const ZeroPartition& owned = zero_.optimizer_partition();
  // Stage 0 keeps all the state on every rank: rank 0 writes it as shard 0 of 1.
  const int shards = owned.world_size();

  // Named by the attempt's epoch, which every rank knows, on every host.
  const int64_t epoch = options_.checkpoint_epoch;
  const std::filesystem::path temporary =
      checkpoint_temporary_dir(checkpoint_dir_, state_.step, epoch);
  agree_on_checkpoint("begin the checkpoint", leader, [&] {
    check_checkpoint_epoch(checkpoint_dir_, epoch, "begin a checkpoint");
    // One of this step that a resume skipped as damaged is kept aside.
    const std::optional<SetAsideCheckpoint> aside =
        set_aside_damaged_checkpoint(checkpoint_dir_, state_.step);
    if (aside) {
      log("moved the damaged checkpoint of step " + std::to_string(state_.step) + " aside to " +
          aside->path.string() + ": " + aside->reason);
    }
    // This attempt never wrote this step: one already there was written
    // by a superseded attempt, and is replaced.
    if (epoch > 0) remove_checkpoint(checkpoint_dir_, state_.step, epoch);
    begin_checkpoint(checkpoint_dir_, state_.step, epoch);
    return CheckpointWords{};
  });
  try {
    const std::vector<CheckpointWords> written =
        agree_on_checkpoint("write its shard", shards > 1 || leader, [&] {
          std::vector<std::vector<float>> values;  // this rank's partition, packed
          values.reserve(std::size(kStateTensors));
          std::vector<HostTensor> tensors;
          for (const StateTensor& tensor : kStateTensors) {
            values.push_back(zero_.owned_values(tensor.which));
            const Shape shape{static_cast<int64_t>(values.back().size())};
            tensors.push_back(HostTensor{{tensor.name, DType::kF32, shape}, values.back().data()});
          }
          SafetensorsMetadata metadata = shard_metadata(plain_runs(model_->layout(), owned));
          metadata.emplace(kHfConfigMetadataKey, hf_config_metadata(model_->config()));
          return file_words(write_checkpoint_file(temporary, shard_file_name(owned.rank(), shards),
                                                  tensors, metadata));
        });
    agree_on_checkpoint("commit the checkpoint", leader, [&] {
      std::vector<ManifestFile> files;
      for (int r = 0; r < shards; ++r)
        files.push_back(file_from_words(shard_file_name(r, shards), written[r]));
      if (fp8_recipe_) {
        const std::vector<float> recipe = fp8_recipe_->state();
        const HostTensor tensor{
            {kFp8RecipeTensorName, DType::kF32, {static_cast<int64_t>(recipe.size())}},
            recipe.data()};
        files.push_back(write_checkpoint_file(temporary, kFp8RecipeFileName, {&tensor, 1}));
      }
      check_checkpoint_epoch(checkpoint_dir_, epoch, "commit a checkpoint");
      commit_checkpoint(temporary, state_.step, files, trainer_state_to_json(state_));
      check_checkpoint_epoch(checkpoint_dir_, epoch, "prune checkpoints");
      retain_checkpoints(checkpoint_dir_, static_cast<size_t>(spec_.checkpoint.keep), epoch);
      return CheckpointWords{};
    });
  } catch (...) {
    if (leader) abort_checkpoint(temporary);  // nothing left once committed
    throw;
  }
  last_checkpoint_step_ = state_.step;
}

void Trainer::restore_checkpoint(const std::filesystem::path& resume_dir) {
  const TrainerCheckpoint checkpoint = open_resume_checkpoint(
      resume_dir, [this](const std::filesystem::path& skipped, const std::string& reason) {
        log("resume: passing over checkpoint " + skipped.string() + ": " + reason);
      });
  log("resume: resuming from checkpoint " + checkpoint.path.string() + " (step " +
      std::to_string(checkpoint.state.step) + ")");
  const std::string source = checkpoint.path.string();
  const TrainerState& restored = checkpoint.state;
  check_resumable(restored, model_->config(), spec_.precision.compute, source);
  MIXTRAIN_CHECK_ARG(restored.sampler.seed == static_cast<uint64_t>(spec_.train.seed),
                     source +
                         ": cannot resume: the checkpoint was trained with "
                         "train.seed " +
                         std::to_string(restored.sampler.seed) + " but the job spec has " +
                         std::to_string(spec_.train.seed));
  const std::vector<FlatRun> runs = plain_runs(model_->layout(), zero_.optimizer_partition());
  for (const StateTensor& tensor : kStateTensors)
    zero_.load_owned(tensor.which, checkpoint.shards.read(tensor.name, runs));
  zero_.refresh_weights();
  if (fp8_recipe_) {
    MIXTRAIN_CHECK_ARG(checkpoint.fp8_recipe.has_value(),
                       source + ": cannot resume: the checkpoint has no " + kFp8RecipeFileName +
                           " for this compute fp8 job");
    fp8_recipe_->restore(*checkpoint.fp8_recipe);
  }
  scaler_.restore(restored.scaler);
  sampler_.restore(restored.sampler);
  state_ = restored;
  last_checkpoint_step_ = state_.step;
}

}  // namespace mixtrain
