// Why: see resources.h.
#include "worker/resources.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "engine/backend/backend.h"
#include "engine/common/usable_cores.h"
#include "net/error_status.h"
#include "proto/training_device.h"
#ifdef MIXTRAIN_WITH_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#endif

namespace mixtrain::worker {
absl::StatusOr<std::string> resolve_backend(const std::string& choice) {
  BackendRequest request;
  try {
    request = parse_backend_name(choice);
  } catch (const EngineError& e) {
    return net::to_status(e, "--backend: ");
  }
  if (request.kind == BackendRequest::Kind::kCpu) return std::string("cpu");
#ifdef MIXTRAIN_WITH_CUDA
  const int count = cuda_device_count();
  if (count == 0) {
    if (request.kind == BackendRequest::Kind::kAuto) return std::string("cpu");
    return absl::UnavailableError("--backend " + choice +
                                  ": no usable CUDA device: " + cuda_unavailable_reason());
  }
  const int device = std::max(request.device, 0);
  if (device >= count) {
    return absl::UnavailableError("--backend " + choice + ": only " + std::to_string(count) +
                                  " CUDA device(s) present (0-" + std::to_string(count - 1) + ")");
  }
  return "cuda:" + std::to_string(device);
#else
  if (request.kind == BackendRequest::Kind::kAuto) return std::string("cpu");
  return absl::UnavailableError("--backend " + choice + ": this build has no CUDA backend");
#endif
}

v1::Resources detect_resources(const std::string& backend) {
  v1::Resources out;
  out.set_cpu_cores(usable_cores());
  out.set_host_cores(static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency())));
  out.set_host_id(host_id());
  out.set_memory_bytes(machine_memory_bytes());
#ifdef MIXTRAIN_WITH_CUDA
  out.set_cuda_unavailable(cuda_unavailable_reason());
  for (int i = 0; i < cuda_device_count(); ++i) {
    const CudaDeviceInfo info = cuda_device_info(i);
    v1::CudaDevice* device = out.add_cuda_devices();
    device->set_index(i);
    device->set_name(info.name);
    device->set_memory_bytes(info.memory_bytes);
    device->set_compute_capability_major(info.compute_capability_major);
    device->set_compute_capability_minor(info.compute_capability_minor);
    device->set_multiprocessors(info.multiprocessors);
    device->set_clock_khz(info.clock_khz);
  }
#endif
  if (backend != "cpu") {
    out.set_backend(v1::BACKEND_CUDA);
    out.set_cuda_device(parse_backend_name(backend).device);
  } else {
    out.set_backend(v1::BACKEND_CPU);
  }
  return out;
}

std::string host_id() {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(file, id);
  return id;
}

std::string hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

double estimated_peak_flops(const v1::Resources& resources) {
  if (resources.backend() == v1::BACKEND_CPU)
    return static_cast<double>(resources.cpu_cores()) * 2.5e9 * 32.0;
  // Dense fp16/bf16 tensor-core FLOPs per SM per clock, fp32 accumulation,
  // from NVIDIA's published peaks: V100/T4 1024; A100 2048 (108 SMs x
  // 1.41 GHz = 312 TFLOP/s); A10, L4, L40S and RTX PRO (8.6, 8.9, 12.x)
  // 1024; H100/H200 4096 (132 SMs x 1.83 GHz = 989 TFLOP/s); B200 8192.
  // The driver's clock is the SMs' maximum, which can be above the clock a
  // published peak assumes (H100 SXM: 1.98 against 1.83 GHz), so MFU reads
  // a few percent low rather than high; --peak-tflops gives it exactly.
  const v1::CudaDevice* found = training_device(resources);
  if (found == nullptr) return 0.0;
  const v1::CudaDevice& device = *found;
  const int major = device.compute_capability_major();
  const int minor = device.compute_capability_minor();
  double per_clock = 0.0;
  if (major == 7 || (major == 8 && minor != 0) || major == 12) per_clock = 1024;
  if (major == 8 && minor == 0) per_clock = 2048;
  if (major == 9) per_clock = 4096;
  if (major == 10) per_clock = 8192;
  return per_clock * device.multiprocessors() * device.clock_khz() * 1e3;
}

}  // namespace mixtrain::worker
