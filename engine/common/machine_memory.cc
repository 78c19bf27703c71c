// Why: see machine_memory.h.
#include "engine/common/machine_memory.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

namespace mixtrain {

int64_t parse_meminfo_total(const std::string& meminfo) {
  std::istringstream in(meminfo);
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemTotal:") return kib * 1024;
  }
  return 0;
}

namespace {

// The text of `path`; nullopt when it cannot be opened.
std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

int64_t parse_cgroup_memory_limit(const std::string& text) {
  std::istringstream in(text);
  int64_t bytes = 0;
  // cgroup v1 writes "no limit" as the largest page-aligned int64.
  if (!(in >> bytes) || bytes <= 0 || bytes >= (int64_t{1} << 62)) return 0;
  return bytes;
}

std::vector<std::string> cgroup_memory_limit_files(const std::string& proc_self_cgroup) {
  std::vector<std::string> files;
  std::istringstream lines(proc_self_cgroup);
  std::string line;
  while (std::getline(lines, line)) {
    // "hierarchy-id:controllers:path": "0::/a" (v2), "4:memory:/a" (v1).
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    if (path == "/") path.clear();
    std::string mount, file;
    if (controllers.empty()) {
      mount = "/sys/fs/cgroup";
      file = "/memory.max";
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      mount = "/sys/fs/cgroup/memory";
      file = "/memory.limit_in_bytes";
    } else {
      continue;
    }
    // In a container the cgroup's own directory is usually mounted as the root.
    if (!path.empty()) files.push_back(mount + path + file);
    files.push_back(mount + file);
  }
  return files;
}

int64_t machine_memory_bytes() {
  int64_t bytes = parse_meminfo_total(read_text("/proc/meminfo").value_or(""));
  for (const std::string& file :
       cgroup_memory_limit_files(read_text("/proc/self/cgroup").value_or(""))) {
    const std::optional<std::string> text = read_text(file);
    if (!text) continue;
    const int64_t limit = parse_cgroup_memory_limit(*text);
    if (limit > 0 && (bytes == 0 || limit < bytes)) bytes = limit;
    break;
  }
  return bytes;
}

int64_t default_memory_limit(int64_t total) {
  const int64_t reserve = std::max<int64_t>(int64_t{512} << 20, total / 10);
  return std::max<int64_t>(0, total - reserve);
}

}  // namespace mixtrain
