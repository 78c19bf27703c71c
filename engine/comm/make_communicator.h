// Why: the trainer picks a communicator by where its tensors live, without
// knowing which backends this build has: "gloo" for CPU tensors, "nccl"
// for CUDA tensors, each present only when its library was found.
#pragma once

#include <memory>
#include <string_view>

#include "engine/backend/backend.h"
#include "engine/comm/communicator.h"
#include "engine/comm/store.h"

namespace mixtrain {

// "gloo" for kCpu, "nccl" for kCuda.
const char* default_comm_backend(DeviceType device);

// A communicator of `backend` ("gloo" or "nccl"), joined through `store`
// as the backend's constructor describes. Throws EngineError
// (kInvalidArgument) for an unknown name and (kUnavailable) for a backend
// this build lacks, naming what to install.
std::unique_ptr<Communicator> make_communicator(std::string_view backend, Store& store, int rank,
                                                int world_size, CommOptions options = {});

// The communicator of a rank training on `backend`: default_comm_backend
// of its device type, on the backend's own device (options.cuda_device is
// set from it, so NCCL and the tensors share a GPU). First the backend
// leaves device_reserve(world_size) of its device to the runtime and
// NCCL's buffers, as the planner counts them.
std::unique_ptr<Communicator> make_rank_communicator(Backend& backend, Store& store,
                                                     int rank, int world_size,
                                                     CommOptions options = {});

}  // namespace mixtrain
