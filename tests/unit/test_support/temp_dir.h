// Why: tests that write real files each get a fresh private directory
// (mkdtemp) that is removed with everything in it afterwards, so tests never
// collide, even when ctest runs them in parallel. Shared by every area.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace mixtrain::test_support {

class TempDir {
 public:
  // Creates a new empty directory under the system temporary directory.
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "mixtrain-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The directory itself.
  const std::filesystem::path& path() const { return path_; }
  // The path of file `name` in the directory (which need not exist).
  std::string path(const std::string& name) const { return (path_ / name).string(); }

  // Writes `bytes` to file `name` in the directory; returns its path.
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string file = path(name);
    std::ofstream out(file, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good()) << "writing " << file;
    return file;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace mixtrain::test_support
