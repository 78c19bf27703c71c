// Why: a worker registers the memory its ranks may use and `mixtrain plan`
// checks a job against the same figure on this machine; both read the
// machine's memory and keep the same reserve for the system here.
#pragma once

#include <cstdint>
#include <string>

namespace mixtrain {

// MemTotal in bytes from the text of /proc/meminfo; 0 when absent.
int64_t parse_meminfo_total(const std::string& meminfo);

// This machine's memory (MemTotal of /proc/meminfo); 0 when unreadable.
int64_t machine_memory_bytes();

// The memory a worker's ranks may use on a machine of `total` bytes when
// no --memory-limit is given: all of it less a reserve for the system and
// the worker itself (a tenth, at least 512 MiB); 0 (unknown) for 0.
int64_t default_memory_limit(int64_t total);

}  // namespace mixtrain
