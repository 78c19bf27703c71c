// Why: a worker registers the memory its ranks may use and `mixtrain plan`
// checks a job against the same figure on this machine; both read the
// machine's memory and keep the same reserve for the system here. In a
// container the machine's MemTotal overstates what a worker may use: the
// cgroup's memory limit bounds it (issue 29: a worker once registered more
// memory than it could ever get, and was given a job that could not fit).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mixtrain {

// MemTotal in bytes from the text of /proc/meminfo; 0 when absent.
int64_t parse_meminfo_total(const std::string& meminfo);

// A cgroup memory limit from the text of memory.max (v2) or
// memory.limit_in_bytes (v1); 0 for none ("max", or v1's near-2^63 value)
// or unreadable text.
int64_t parse_cgroup_memory_limit(const std::string& text);

// The files that may hold this process's cgroup memory limit, most
// specific first, from the text of /proc/self/cgroup.
std::vector<std::string> cgroup_memory_limit_files(const std::string& proc_self_cgroup);

// The memory this process can get: MemTotal of /proc/meminfo, or its
// cgroup's memory limit when lower; 0 when neither is readable.
int64_t machine_memory_bytes();

// The memory a worker's ranks may use on a machine of `total` bytes when
// no --memory-limit is given: all of it less a reserve for the system and
// the worker itself (a tenth, at least 512 MiB); 0 (unknown) for 0.
int64_t default_memory_limit(int64_t total);

}  // namespace mixtrain
