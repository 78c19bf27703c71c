// Why: tensor creation shared by all backends, and the backend registry.
#include "backend/backend.h"

#include <charconv>

#include "backend/cpu/cpu_backend.h"
#ifdef MIXTRAIN_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace mixtrain {

Tensor Backend::empty(const Shape& shape, DType dtype, MemoryCategory category,
                      MemoryPool pool) {
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  auto storage = std::make_shared<Storage>(allocator_, tracker_, bytes, pool, category);
  return Tensor(std::move(storage), 0, dtype, shape);
}

Tensor Backend::zeros(const Shape& shape, DType dtype, MemoryCategory category,
                      MemoryPool pool) {
  Tensor t = empty(shape, dtype, category, pool);
  set_zero(t);
  return t;
}

std::vector<std::string> available_backends() {
  std::vector<std::string> names = {"cpu"};
#ifdef MIXTRAIN_WITH_CUDA
  if (cuda_device_count() > 0) names.push_back("cuda");
#endif
  return names;
}

std::unique_ptr<Backend> make_backend(std::string_view name) {
  if (name == "cpu") return std::make_unique<CpuBackend>();
  if (name == "auto") {
#ifdef MIXTRAIN_WITH_CUDA
    if (cuda_device_count() > 0) return make_cuda_backend(0);
#endif
    return std::make_unique<CpuBackend>();
  }
  if (name == "cuda" || name.starts_with("cuda:")) {
    int device = 0;
    if (name.size() > 5) {
      auto digits = name.substr(5);
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), device);
      MIXTRAIN_CHECK_ARG(ec == std::errc() && end == digits.data() + digits.size() && device >= 0,
                "backend \"" + std::string(name) + "\": bad device index");
    }
#ifdef MIXTRAIN_WITH_CUDA
    const int count = cuda_device_count();
    if (device < count) return make_cuda_backend(device);
    throw EngineError(ErrorCode::kUnavailable,
                      "backend \"" + std::string(name) + "\": " + std::to_string(count) +
                          " CUDA device(s) present");
#else
    throw EngineError(ErrorCode::kUnavailable,
                      "backend \"" + std::string(name) +
                          "\": this build has no CUDA backend (nvcc was not found)");
#endif
  }
  throw EngineError(ErrorCode::kInvalidArgument,
                    "unknown backend \"" + std::string(name) + "\" (expected cpu, cuda, auto)");
}

}  // namespace mixtrain
