// Why: the CUDA backend's entry points, callable from plain C++ (no CUDA
// headers here) so the registry in backend.cc can offer "cuda" when this
// build has it and a device is present.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace mixtrain {

// Number of usable CUDA devices; 0 when there is no driver or no device
// (never throws).
int cuda_device_count();

// A backend on device `device` (0-based). Throws EngineError(kUnavailable)
// when the device cannot be used.
std::unique_ptr<Backend> make_cuda_backend(int device);

}  // namespace mixtrain
