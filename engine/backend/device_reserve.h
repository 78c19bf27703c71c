// Why: the CUDA runtime and NCCL allocate device memory that the engine's
// allocator never sees: the context with the kernel images loaded into it
// (lazily, at a kernel's first launch), and each NCCL connection's
// buffers (at a communicator's first collective of a kind). A plan that
// counts only the engine's tensors fills a GPU exactly and then runs out
// of memory at the first collective, and a memory pool that keeps all it
// was ever given leaves NCCL nothing. This is the one figure for both: the
// planner adds it to a rank's device need, and the CUDA backend's pool
// gives back, at each synchronisation, what it holds beyond the rest.
#pragma once

#include <cstdint>

namespace mixtrain {

// The channels an NCCL communicator may use (ncclConfig_t::maxCTAs, NCCL's
// own default on Hopper): NCCL allocates no buffers for more than these.
inline constexpr int kNcclMaxChannels = 32;

struct DeviceReserve {
  int64_t runtime = 0;  // the CUDA context, kernel images, cuBLAS handles
  int64_t nccl = 0;     // one NCCL communicator's buffers; 0 for one rank
  int64_t total() const { return runtime + nccl; }
};

// A rank's reserve on a GPU in a job of `world_size` ranks. NCCL's buffers:
// per channel, the ring's connection and up to three tree connections,
// each with one buffer per protocol, sized as NCCL sizes them (4 MiB
// simple, 4.6875 MiB LL128, 512 KiB LL; NCCL_BUFFSIZE, NCCL_LL128_BUFFSIZE
// and NCCL_LL_BUFFSIZE override them there and here alike).
DeviceReserve device_reserve(int64_t world_size);

}  // namespace mixtrain
