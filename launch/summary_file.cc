// Why: see summary_file.h.
#include "launch/summary_file.h"

#include <filesystem>
#include <fstream>

namespace mixtrain::launch {

bool summary_path_usable(const std::string& path, const std::string& who, std::ostream& err) {
  std::error_code error;
  const std::filesystem::path parent = std::filesystem::absolute(path, error).parent_path();
  if (std::filesystem::is_directory(parent, error)) return true;
  err << who << ": cannot write --summary-json " << path << ": no directory " << parent.string()
      << "\n";
  return false;
}

bool write_summary_file(const std::string& path, const std::string& json_text,
                        const std::string& who, std::ostream& err) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << json_text << "\n";
    if (!file.good()) {
      err << who << ": cannot write --summary-json " << path << "\n";
      return false;
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    err << who << ": cannot write --summary-json " << path << ": " << error.message() << "\n";
    return false;
  }
  return true;
}

}  // namespace mixtrain::launch
