// Why: the backends a name can ask for and the making of one, apart from
// backend.cc: this object references every backend's kernels (oneDNN's,
// CUDA's), and only a program that makes a backend should link them.
#include <charconv>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_backend.h"
#ifdef MIXTRAIN_WITH_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#endif

namespace mixtrain {

std::vector<std::string> available_backends() {
  std::vector<std::string> names = {"cpu"};
#ifdef MIXTRAIN_WITH_CUDA
  if (cuda_device_count() > 0) names.push_back("cuda");
#endif
  return names;
}

BackendRequest parse_backend_name(std::string_view name) {
  using Kind = BackendRequest::Kind;
  if (name == "cpu") return {Kind::kCpu};
  if (name == "auto") return {Kind::kAuto};
  if (name == "cuda") return {Kind::kCuda};
  MIXTRAIN_CHECK_ARG(name.starts_with("cuda:"), "unknown backend \"" + std::string(name) +
                                                    "\" (expected cpu, cuda, cuda:N or auto)");
  const std::string_view digits = name.substr(5);
  int device = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), device);
  MIXTRAIN_CHECK_ARG(ec == std::errc() && end == digits.data() + digits.size() && device >= 0,
                     "backend \"" + std::string(name) + "\": bad device index");
  return {Kind::kCuda, device};
}

int default_cuda_device(int local_rank, int device_count) {
  return device_count > 0 ? local_rank % device_count : 0;
}

std::unique_ptr<Backend> make_backend(std::string_view name, int local_rank) {
  const BackendRequest request = parse_backend_name(name);
  if (request.kind == BackendRequest::Kind::kCpu) return std::make_unique<CpuBackend>();
#ifdef MIXTRAIN_WITH_CUDA
  const int count = cuda_device_count();
  if (request.kind == BackendRequest::Kind::kAuto && count == 0) {
    return std::make_unique<CpuBackend>();
  }
  const int device = request.device >= 0 ? request.device : default_cuda_device(local_rank, count);
  if (device < count) return make_cuda_backend(device);
  throw EngineError(ErrorCode::kUnavailable,
                    "backend \"" + std::string(name) + "\": " + std::to_string(count) +
                        " CUDA device(s) present" +
                        (count == 0 ? " (" + cuda_unavailable_reason() + ")" : ""));
#else
  (void)local_rank;
  if (request.kind == BackendRequest::Kind::kAuto) return std::make_unique<CpuBackend>();
  throw EngineError(ErrorCode::kUnavailable,
                    "backend \"" + std::string(name) +
                        "\": this build has no CUDA backend (nvcc was not found)");
#endif
}

}  // namespace mixtrain
