// Why: the CUDA backend's entry points, callable from plain C++ (no CUDA
// headers here) so the registry in backend.cc can offer "cuda" when this
// build has it and a device is present.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/backend/backend.h"

namespace mixtrain {

// Number of usable CUDA devices; 0 when there is no driver or no device
// (never throws; the first call says why on stderr when there is none).
int cuda_device_count();

// Why no CUDA device is usable, from the CUDA runtime ("CUDA driver version
// is insufficient for CUDA runtime version (cudaErrorInsufficientDriver)"),
// or "" when one is.
std::string cuda_unavailable_reason();

// The installed CUDA driver's version ("13.0"), or "" without a driver.
std::string cuda_driver_version();

// What a worker agent advertises about one device.
struct CudaDeviceInfo {
  std::string name;
  int64_t memory_bytes = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int multiprocessors = 0;  // streaming multiprocessors
  int clock_khz = 0;        // the SMs' peak clock
};

// The properties of device `device` (0-based); an empty name when it
// cannot be queried (never throws).
CudaDeviceInfo cuda_device_info(int device);

// A backend on device `device` (0-based). Throws EngineError(kUnavailable)
// when the device cannot be used.
std::unique_ptr<Backend> make_cuda_backend(int device);

}  // namespace mixtrain
