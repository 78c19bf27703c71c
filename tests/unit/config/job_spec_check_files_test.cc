// Why: a typo in a data path must fail before a job is scheduled, while
// builtin data and specs checked on another machine need no files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/config/job_spec.h"

namespace mixtrain::config {
namespace {

class CheckFiles : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(testing::TempDir()) /
           ("mixtrain_check_files_" +
            std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "subdir");
    std::ofstream(dir_ / "train.txt") << "hello";
    spec_.name = "unit";
    spec_.data.train = "train.txt";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  JobSpec spec_;
};

TEST_F(CheckFiles, ExistingRelativeFileResolvesAgainstBaseDir) {
  EXPECT_TRUE(check_files(spec_, dir_).empty());
}

TEST_F(CheckFiles, AbsolutePathIgnoresBaseDir) {
  spec_.data.train = (dir_ / "train.txt").string();
  EXPECT_TRUE(check_files(spec_, "/nonexistent").empty());
}

TEST_F(CheckFiles, MissingTrainFileIsNamed) {
  spec_.data.train = "trian.txt";
  const std::vector<SpecError> errors = check_files(spec_, dir_);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].key_path, "data.train");
  EXPECT_NE(errors[0].message.find("file not found"), std::string::npos);
  EXPECT_NE(errors[0].message.find("trian.txt"), std::string::npos);
}

TEST_F(CheckFiles, DirectoryIsNotAFile) {
  spec_.data.val = "subdir";
  const std::vector<SpecError> errors = check_files(spec_, dir_);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].key_path, "data.val");
  EXPECT_NE(errors[0].message.find("not a regular file"), std::string::npos);
}

TEST_F(CheckFiles, MissingInitFromIsNamed) {
  spec_.model.init_from = "start.safetensors";
  const std::vector<SpecError> errors = check_files(spec_, dir_);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].key_path, "model.init_from");
}

TEST_F(CheckFiles, CheckpointDirThatIsAFileOrUnderOneIsNamed) {
  for (const char* dir : {"train.txt", "train.txt/sub"}) {
    spec_.checkpoint.dir = dir;
    const std::vector<SpecError> errors = check_files(spec_, dir_);
    ASSERT_EQ(errors.size(), 1u) << dir;
    EXPECT_EQ(errors[0].key_path, "checkpoint.dir");
    EXPECT_NE(errors[0].message.find("train.txt"), std::string::npos) << errors[0].message;
  }
  spec_.checkpoint.dir = "subdir/new/deeper";
  EXPECT_TRUE(check_files(spec_, dir_).empty()) << "a directory still to be created is fine";
}

TEST_F(CheckFiles, BuiltinDataNeedsNoFile) {
  spec_.data.train = std::string(kBuiltinDemoData);
  EXPECT_TRUE(check_files(spec_, dir_).empty());
}

}  // namespace
}  // namespace mixtrain::config
