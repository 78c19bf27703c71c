// Why: `mixtrain workers` shows the worker agents the coordinator knows:
// whether each is idle, busy (and with what) or lost, what it trains on,
// and when it was last heard from.
#pragma once

#include <ostream>

#include "client/coordinator_client.h"

namespace mixtrain::cli {

// A table (ID, HOST, DATA ADDRESS, STATE, BACKEND, CORES, THREADS, MEMORY,
// TASK, LAST SEEN) or a JSON list of {"id","hostname","state","backend",
// "device" (what its rank trains on: "cpu", "cuda:1"),"cuda_unavailable"
// (why no GPU is usable),"cpu_cores","threads","memory_bytes",
// "cuda_devices","data_address","metrics_address","task",
// "registered_unix_ms","last_heartbeat_unix_ms"}. Returns 0 or
// CoordinatorClient::report's exit code.
int run_workers_command(CoordinatorClient& client, OutputFormat format, std::ostream& out,
                        std::ostream& err);

}  // namespace mixtrain::cli
