// Why: a job's input files must come from beneath the data root however
// the path or the tree was bent after the submit check. Each way out (a
// symlink as the file or in the middle of the path, absolute or relative,
// "..", an absolute path, a /proc magic link) is tried against both ways of
// resolving (openat2, and the component walk of kernels without it), and
// plain files, nested or not, must still open.
#include "engine/common/contained_open.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "engine/common/error.h"
#include "test_support/temp_dir.h"

namespace mixtrain {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// A data root holding root/train.txt and root/corpus/part.txt, and next to
// it a directory outside/ with outside/secret.txt.
class ContainedOpenTest : public ::testing::TestWithParam<BeneathResolution> {
 protected:
  ContainedOpenTest() {
    fs::create_directories(root_ / "corpus");
    fs::create_directories(outside_);
    temp_.write("root/train.txt", "inside");
    temp_.write("root/corpus/part.txt", "nested");
    temp_.write("outside/secret.txt", "SECRET");
  }

  // The first bytes of `path` opened beneath the root.
  std::string read_beneath(const fs::path& path) {
    const UniqueFd fd = open_input_file(path, root_, GetParam());
    char bytes[16] = {};
    const ssize_t got = ::read(fd.get(), bytes, sizeof(bytes));
    return std::string(bytes, got > 0 ? static_cast<size_t>(got) : 0);
  }

  // The message with which opening `path` beneath the root is refused.
  std::string refusal(const fs::path& path) {
    try {
      open_input_file(path, root_, GetParam());
    } catch (const EngineError& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      return error.what();
    }
    ADD_FAILURE() << path << " was opened";
    return "";
  }

  // What a refused escape through `path` says.
  std::string escape(const fs::path& path) {
    return path.string() + "' escapes the data root " + root_.string() + " (";
  }

  test_support::TempDir temp_;
  const fs::path root_ = temp_.path() / "root";
  const fs::path outside_ = temp_.path() / "outside";
};

TEST_P(ContainedOpenTest, PlainFilesBeneathTheRootOpen) {
  EXPECT_EQ(read_beneath("train.txt"), "inside");
  EXPECT_EQ(read_beneath("corpus/part.txt"), "nested");
  EXPECT_EQ(read_beneath("./corpus//part.txt"), "nested");
}

TEST_P(ContainedOpenTest, DotDotAboveTheRootIsRefused) {
  EXPECT_THAT(refusal("../outside/secret.txt"), HasSubstr(escape("../outside/secret.txt")));
  EXPECT_THAT(refusal("corpus/../../outside/secret.txt"),
              HasSubstr(escape("corpus/../../outside/secret.txt")));
}

TEST_P(ContainedOpenTest, AbsolutePathIsRefused) {
  const fs::path inside = root_ / "train.txt";  // even one that lies beneath the root
  EXPECT_THAT(refusal(inside), HasSubstr(escape(inside)));
}

TEST_P(ContainedOpenTest, FileReplacedByAnAbsoluteSymlinkIsRefused) {
  fs::remove(root_ / "train.txt");
  fs::create_symlink(outside_ / "secret.txt", root_ / "train.txt");
  EXPECT_THAT(refusal("train.txt"), HasSubstr(escape("train.txt")));
}

TEST_P(ContainedOpenTest, DirectoryReplacedByARelativeSymlinkIsRefused) {
  fs::remove_all(root_ / "corpus");
  fs::create_directory_symlink("../outside", root_ / "corpus");
  temp_.write("outside/part.txt", "SECRET");
  EXPECT_THAT(refusal("corpus/part.txt"), HasSubstr(escape("corpus/part.txt")));
}

TEST_P(ContainedOpenTest, MagicLinkIsRefused) {
  // Beneath /proc/self, fd/N is a magic link to whatever that descriptor is.
  const UniqueFd secret = open_input_file(outside_ / "secret.txt", std::nullopt);
  const fs::path magic = "fd/" + std::to_string(secret.get());
  try {
    open_input_file(magic, fs::path("/proc/self"), GetParam());
    FAIL() << "the magic link " << magic << " was followed";
  } catch (const EngineError& error) {
    EXPECT_THAT(error.what(), HasSubstr("escapes the data root /proc/self"));
  }
}

TEST_P(ContainedOpenTest, MissingFileNamesPathRootAndReason) {
  EXPECT_THAT(refusal("corpus/absent.txt"),
              HasSubstr("cannot open 'corpus/absent.txt' beneath the data root " + root_.string() +
                        ": No such file or directory"));
}

INSTANTIATE_TEST_SUITE_P(Resolutions, ContainedOpenTest,
                         ::testing::Values(BeneathResolution::kKernel,
                                           BeneathResolution::kComponentWalk),
                         [](const auto& info) {
                           return info.param == BeneathResolution::kKernel ? "Kernel"
                                                                           : "ComponentWalk";
                         });

// Where the two resolutions differ: the kernel follows a symlink or a ".."
// that stays beneath the root; the walk follows neither (stricter, never
// looser).
TEST(ContainedOpenResolutionTest, KernelFollowsWhatStaysBeneathTheRootTheWalkDoesNot) {
  test_support::TempDir temp;
  temp.write("train.txt", "inside");
  fs::create_directory(temp.path() / "corpus");
  fs::create_symlink("train.txt", temp.path() / "alias.txt");
  for (const fs::path path : {"alias.txt", "corpus/../train.txt"}) {
    EXPECT_TRUE(open_input_file(path, temp.path(), BeneathResolution::kKernel).valid()) << path;
    EXPECT_THAT([&] { open_input_file(path, temp.path(), BeneathResolution::kComponentWalk); },
                ThrowsMessage<EngineError>(HasSubstr("escapes the data root")))
        << path;
  }
}

TEST(ContainedOpenNoRootTest, OpensThePathAsGiven) {
  test_support::TempDir temp;
  const fs::path file = temp.write("train.txt", "inside");
  fs::create_symlink(file, temp.path() / "link.txt");
  EXPECT_TRUE(open_input_file(file, std::nullopt).valid());
  EXPECT_TRUE(open_input_file(temp.path() / "link.txt", std::nullopt).valid());
  EXPECT_THAT(
      [&] { open_input_file(temp.path() / "absent.txt", std::nullopt); },
      ThrowsMessage<EngineError>(HasSubstr("cannot open '" + (temp.path() / "absent.txt").string() +
                                           "': No such file or directory")));
}

}  // namespace
}  // namespace mixtrain
