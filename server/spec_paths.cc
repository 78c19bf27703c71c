// Why: see spec_paths.h.
#include "server/spec_paths.h"

#include <algorithm>
#include <optional>
#include <system_error>

namespace mixtrain::server {
namespace {

// The problem with `value` as the path of `key`, or nullopt when it is fine.
std::optional<std::string> check_path(const std::string& key, const std::string& value,
                                      const std::filesystem::path& data_root) {
  if (value.starts_with("builtin:")) return std::nullopt;
  const std::string named = key + ": '" + value + "' ";
  const std::filesystem::path path(value);
  if (path.empty()) return named + "is empty";
  if (path.is_absolute()) return named + "must be relative to the coordinator's data root";
  std::error_code error;
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(data_root / path, error);
  if (error) return named + "cannot be resolved: " + error.message();
  const auto [root_end, unused] =
      std::mismatch(data_root.begin(), data_root.end(), resolved.begin(), resolved.end());
  if (root_end != data_root.end()) return named + "points outside the coordinator's data root";
  if (!std::filesystem::is_regular_file(resolved, error)) {
    return named + "is not a file under the coordinator's data root";
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> check_spec_paths(const config::JobSpec& spec,
                                          const std::filesystem::path& data_root) {
  std::vector<std::string> problems;
  auto check = [&](const std::string& key, const std::optional<std::string>& value) {
    if (!value) return;
    if (std::optional<std::string> problem = check_path(key, *value, data_root)) {
      problems.push_back(*problem);
    }
  };
  check("data.train", spec.data.train);
  check("data.val", spec.data.val);
  check("model.init_from", spec.model.init_from);
  if (spec.checkpoint.dir) {
    problems.push_back("checkpoint.dir: set by the coordinator under --checkpoint-root");
  }
  return problems;
}

}  // namespace mixtrain::server
