// Why: gathers build and machine facts from the places that know them.
#include "engine/backend/build_info.h"

#include <omp.h>

#include "engine/backend/backend.h"
#include "engine/common/cpu_features.h"
#ifdef MIXTRAIN_WITH_DNNL
#include <dnnl.h>
#endif
#ifdef MIXTRAIN_WITH_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#endif

namespace mixtrain {

BuildInfo build_info() {
  BuildInfo info;
  info.version = MIXTRAIN_VERSION;
#if defined(__clang__)
  info.compiler = std::string("Clang ") + __clang_version__;
#elif defined(__GNUC__)
  info.compiler = "GCC " + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) +
                  "." + std::to_string(__GNUC_PATCHLEVEL__);
#endif
  info.cpu_features = cpu_features().describe();
#ifdef MIXTRAIN_WITH_DNNL
  const dnnl_version_t* v = dnnl_version();
  info.onednn = std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                std::to_string(v->patch);
#endif
#ifdef MIXTRAIN_WITH_CUDA
  info.cuda_compiled = true;
  info.cuda_devices = cuda_device_count();
  info.cuda_unavailable = cuda_unavailable_reason();
  info.cuda_driver = cuda_driver_version();
#endif
  info.omp_threads = omp_get_max_threads();
  info.backends = available_backends();
  return info;
}

}  // namespace mixtrain
