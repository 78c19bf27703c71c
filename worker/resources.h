// Why: the coordinator places a job only on workers that can run it, so
// each agent registers what it has: CPU cores, memory, CUDA devices and
// the backend it trains with (DESIGN.md §3 --backend auto|cpu|cuda).
#pragma once

#include <absl/status/statusor.h>

#include <string>

#include "engine/common/machine_memory.h"
#include "proto/mixtrain.pb.h"

namespace mixtrain::worker {

// "cpu" or "cuda:N" for a --backend choice (auto, cpu, cuda, cuda:N): cuda
// is cuda:0, auto is cuda:0 when this build has CUDA and a device is
// usable, else cpu. INVALID_ARGUMENT for another word, UNAVAILABLE for a
// GPU that is not there (saying why no device is usable).
absl::StatusOr<std::string> resolve_backend(const std::string& choice);

// This machine: the CPU cores this process may use (usable_cores.h), the
// host's online CPUs and its host_id(),
// MemTotal of /proc/meminfo as memory_bytes (0 when it cannot be read;
// the agent then registers its limit), CUDA devices when
// this build has CUDA (else none, or why there are none), and `backend`
// ("cpu" or "cuda:N", the device its ranks train on).
v1::Resources detect_resources(const std::string& backend);

// The kernel's boot id: one value for every process and container on
// this machine until it reboots, so the coordinator can tell which workers
// share a host's cores (hostnames and addresses differ per container).
// Empty when it cannot be read.
std::string host_id();

// This machine's hostname ("localhost" when it has none).
std::string hostname();

// A rough peak rate for MFU when no --peak-tflops is given: for the cpu
// backend the cores' FP32 rate, cores x 2.5 GHz x 32 FLOP/cycle (two AVX2
// FMA pipes); for cuda the training device's dense fp16/bf16 tensor-core rate,
// SMs x clock x its architecture's FLOPs per SM per clock. 0 when the
// architecture is unknown (MFU then needs --peak-tflops).
double estimated_peak_flops(const v1::Resources& resources);

}  // namespace mixtrain::worker
