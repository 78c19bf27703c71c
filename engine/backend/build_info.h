// Why: one answer to "what is this build and what can it use here" for
// `mixtrain env`, logs and the coordinator's mixtrain_build_info metric.
#pragma once

#include <string>
#include <vector>

namespace mixtrain {

struct BuildInfo {
  std::string version;                  // e.g. "0.1.0"
  std::string compiler;                 // e.g. "GCC 12.2.0"
  std::string cpu_features;             // CpuFeatures::describe()
  std::string onednn;                   // "2.6.3" or "" when not built with it
  bool cuda_compiled = false;           // the CUDA backend is in this build
  int cuda_devices = 0;                 // usable CUDA devices now
  std::string cuda_unavailable;         // why there are none (cuda_unavailable_reason())
  std::string cuda_driver;              // the driver's CUDA version ("13.0"), "" without one
  int omp_threads = 1;                  // OpenMP threads kernels will use
  std::vector<std::string> backends;    // available_backends()
};

// Collects the facts above (cheap; probes CUDA devices once).
BuildInfo build_info();

}  // namespace mixtrain
