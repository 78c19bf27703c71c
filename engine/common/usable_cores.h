// Why: several ranks share one machine (compose --scale, hosts with many
// agents, `mixtrain local`), and a rank that starts one thread per core of
// the machine oversubscribes them all: a 2-worker job on 3 simulated hosts
// of 2 cores took 93 s instead of 6 s. What a process may really use is
// its CPU affinity mask, further capped by its cgroup's CPU quota.
#pragma once

#include <optional>
#include <string>

namespace mixtrain {

// The cores this process may use: the CPUs of its affinity mask, at most
// its cgroup's quota (cgroup v2 cpu.max or v1 cfs_quota_us/cfs_period_us)
// rounded up; at least 1.
int usable_cores();

// The cores a quota allows from the text of cgroup v2's cpu.max
// ("max 100000" or "150000 100000"), rounded up; nullopt for no limit or
// text that is not a quota.
std::optional<int> cgroup_v2_quota_cores(const std::string& cpu_max);

}  // namespace mixtrain
