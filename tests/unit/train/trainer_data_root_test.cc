// Why: a service task gives the trainer the coordinator's --data-root, and
// every input file the spec names (data.train, data.val, model.init_from)
// must be opened beneath it (common/contained_open.h) however the files
// were swapped after the submit check; plain files there must still load.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/model/hf_safetensors.h"
#include "engine/model/parameter_layout.h"
#include "test_support/engine_error.h"
#include "test_support/temp_dir.h"
#include "train_test_util.h"

namespace mixtrain::train_test {
namespace {

namespace fs = std::filesystem;

// A data root holding train.txt and init.safetensors (weights for
// tiny_spec's model), and beside it outside/ with copies of both.
class TrainerDataRootTest : public ::testing::Test {
 protected:
  TrainerDataRootTest() {
    fs::create_directories(root_);
    fs::create_directories(outside_);
    const std::string text(4000, 'a');
    temp_.write("root/train.txt", text);
    temp_.write("outside/train.txt", text);
    const config::JobSpec spec = tiny_spec(DType::kF32, 1, temp_.path() / "ckpt");
    const GptConfig model{spec.model.layers, spec.model.heads, spec.model.dim, spec.model.seq_len,
                          spec.model.vocab};
    const std::vector<float> weights(ParameterLayout(model).numel(), 0.01f);
    export_hf_safetensors(root_ / "init.safetensors", model, weights, DType::kF32);
    fs::copy_file(root_ / "init.safetensors", outside_ / "init.safetensors");
  }

  // tiny_spec reading train.txt from `train`, starting from `init_from`.
  config::JobSpec spec(const std::string& train, const std::string& init_from) {
    config::JobSpec spec = tiny_spec(DType::kF32, 1, temp_.path() / "ckpt");
    spec.data.train = train;
    spec.model.init_from = init_from;
    return spec;
  }

  TrainerOptions beneath_root() {
    TrainerOptions options;
    options.data_root = root_;
    return options;
  }

  std::unique_ptr<Backend> backend_ = make_backend("cpu");
  test_support::TempDir temp_;
  const fs::path root_ = temp_.path() / "root";
  const fs::path outside_ = temp_.path() / "outside";
};

TEST_F(TrainerDataRootTest, FilesBeneathTheRootLoadByTheirRelativePaths) {
  Trainer trainer(*backend_, spec("train.txt", "init.safetensors"), beneath_root());
  EXPECT_EQ(trainer.step(), 0);
}

TEST_F(TrainerDataRootTest, DataFileSymlinkedOutOfTheRootIsRefused) {
  fs::remove(root_ / "train.txt");
  fs::create_symlink(outside_ / "train.txt", root_ / "train.txt");
  EXPECT_TRUE(test_support::throws_invalid_argument(
      [&] { Trainer(*backend_, spec("train.txt", "init.safetensors"), beneath_root()); },
      {"'train.txt' escapes the data root " + root_.string()}));
}

TEST_F(TrainerDataRootTest, InitFromSymlinkedOutOfTheRootIsRefused) {
  fs::remove(root_ / "init.safetensors");
  fs::create_symlink("../outside/init.safetensors", root_ / "init.safetensors");
  EXPECT_TRUE(test_support::throws_invalid_argument(
      [&] { Trainer(*backend_, spec("train.txt", "init.safetensors"), beneath_root()); },
      {"'init.safetensors' escapes the data root " + root_.string()}));
}

TEST_F(TrainerDataRootTest, WithoutADataRootPathsOpenAsGiven) {
  fs::remove(root_ / "train.txt");
  fs::create_symlink(outside_ / "train.txt", root_ / "train.txt");
  Trainer trainer(*backend_,
                  spec((root_ / "train.txt").string(), (outside_ / "init.safetensors").string()));
  EXPECT_EQ(trainer.step(), 0);
}

}  // namespace
}  // namespace mixtrain::train_test
