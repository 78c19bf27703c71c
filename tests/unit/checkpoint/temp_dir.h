// Why: checkpoint tests write real files; each test gets its own fresh
// directory (mkdtemp) that is removed afterwards, so tests never collide,
// even when ctest runs them in parallel.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace mixtrain::testing_support {

class TempDir {
 public:
  // Creates a new empty directory under the system temporary directory.
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "mixtrain_ckpt_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace mixtrain::testing_support
