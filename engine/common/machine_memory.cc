// Why: see machine_memory.h.
#include "engine/common/machine_memory.h"

#include <algorithm>
#include <fstream>
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

int64_t machine_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::stringstream text;
  text << meminfo.rdbuf();
  return parse_meminfo_total(text.str());
}

int64_t default_memory_limit(int64_t total) {
  const int64_t reserve = std::max<int64_t>(int64_t{512} << 20, total / 10);
  return std::max<int64_t>(0, total - reserve);
}

}  // namespace mixtrain
