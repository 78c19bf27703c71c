// Why: see usable_cores.h.
#include "engine/common/usable_cores.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

namespace mixtrain {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The quota of cgroup v1's cpu controller, when one is set.
std::optional<int> cgroup_v1_quota_cores() {
  long long quota = 0;
  long long period = 0;
  std::istringstream(read_file("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")) >> quota;
  std::istringstream(read_file("/sys/fs/cgroup/cpu/cpu.cfs_period_us")) >> period;
  if (quota <= 0 || period <= 0) return std::nullopt;
  return std::max(1, static_cast<int>(std::ceil(static_cast<double>(quota) / period)));
}

}  // namespace

std::optional<int> cgroup_v2_quota_cores(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota;
  long long period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return std::nullopt;
  long long value = 0;
  std::istringstream quota_in(quota);
  if (!(quota_in >> value) || value <= 0) return std::nullopt;
  return std::max(1, static_cast<int>(std::ceil(static_cast<double>(value) / period)));
}

int usable_cores() {
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0) cores = std::max(1, CPU_COUNT(&mask));
  std::optional<int> quota = cgroup_v2_quota_cores(read_file("/sys/fs/cgroup/cpu.max"));
  if (!quota) quota = cgroup_v1_quota_cores();
  if (quota) cores = std::min(cores, *quota);
  return cores;
}

}  // namespace mixtrain
