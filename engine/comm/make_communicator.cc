// Why: see make_communicator.h.
#include "engine/comm/make_communicator.h"

#include <string>
#include <utility>

#include "engine/backend/device_reserve.h"
#include "engine/common/error.h"
#ifdef MIXTRAIN_WITH_GLOO
#include "engine/comm/gloo/gloo_communicator.h"
#endif
#ifdef MIXTRAIN_WITH_NCCL
#include "engine/comm/nccl/nccl_communicator.h"
#endif

namespace mixtrain {

const char* default_comm_backend(DeviceType device) {
  return device == DeviceType::kCuda ? "nccl" : "gloo";
}

std::unique_ptr<Communicator> make_communicator(std::string_view backend, Store& store, int rank,
                                                int world_size, CommOptions options) {
  if (backend == "gloo") {
#ifdef MIXTRAIN_WITH_GLOO
    return std::make_unique<GlooCommunicator>(store, rank, world_size, std::move(options));
#else
    throw EngineError(ErrorCode::kUnavailable,
                      "communicator: this build has no Gloo (install libgloo-dev and rebuild)");
#endif
  }
  if (backend == "nccl") {
#ifdef MIXTRAIN_WITH_NCCL
    return std::make_unique<NcclCommunicator>(store, rank, world_size, std::move(options));
#else
    throw EngineError(ErrorCode::kUnavailable,
                      "communicator: this build has no NCCL (build with the CUDA toolkit)");
#endif
  }
  throw EngineError(
      ErrorCode::kInvalidArgument,
      "communicator: unknown backend '" + std::string(backend) + "' (expected gloo or nccl)");
}

std::unique_ptr<Communicator> make_rank_communicator(Backend& backend, Store& store,
                                                     int rank, int world_size,
                                                     CommOptions options) {
  backend.leave_device_memory(device_reserve(world_size).total());
  options.cuda_device = backend.device_index();
  return make_communicator(default_comm_backend(backend.device_type()), store, rank, world_size,
                           std::move(options));
}

}  // namespace mixtrain
