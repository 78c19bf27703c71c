// Why: the coordinator (placement by GPU memory), the agent (MFU's peak
// rate) and the CLI (`workers`, `status`) all ask which GPU a worker's rank
// trains on and how to name it; one definition beside the proto keeps them
// agreeing.
#pragma once

#include <string>

#include "proto/mixtrain.pb.h"

namespace mixtrain::v1 {

// The GPU a worker with `resources` trains on, or null on the CPU backend
// (or when its device is not among those it listed).
inline const CudaDevice* training_device(const Resources& resources) {
  if (resources.backend() != BACKEND_CUDA) return nullptr;
  for (const CudaDevice& device : resources.cuda_devices()) {
    if (device.index() == resources.cuda_device()) return &device;
  }
  return nullptr;
}

// "cpu" or "cuda:1": what its ranks pass to make_backend.
inline std::string training_device_name(const Resources& resources) {
  return resources.backend() == BACKEND_CUDA ? "cuda:" + std::to_string(resources.cuda_device())
                                             : "cpu";
}

}  // namespace mixtrain::v1
