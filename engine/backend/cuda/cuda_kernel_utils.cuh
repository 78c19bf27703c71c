// Why: launch sizing and the warp/block reductions that several kernels
// share. Every reduction here combines values in a fixed order, so results
// are bit-identical from run to run (no atomics on floating point).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace mixtrain::gpu {

// Threads per block of the elementwise and row kernels.
inline constexpr int kBlockThreads = 256;
inline constexpr int kWarpSize = 32;
// Grid-stride loops cover any size; more blocks than this add nothing.
inline constexpr int64_t kMaxBlocks = 65535;

// Blocks for `work` items processed `per_block` at a time (at least 1).
inline unsigned grid_blocks(int64_t work, int64_t per_block = kBlockThreads) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + per_block - 1) / per_block, 1,
                                                   kMaxBlocks));
}

// Index of this thread in a 1-D grid and the grid's size: the bounds of a
// grid-stride loop.
__device__ inline int64_t thread_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t grid_size() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// A grid-stride loop over n elements W at a time: f(i, width) for each
// full pack (i a multiple of W, width an std::integral_constant<int, W>),
// then f(i, integral_constant<int, 1>) for each of the last n % W elements.
// Launch grid_blocks(n / W) blocks.
template <int W, class F> __device__ inline void for_each_pack(int64_t n, F&& f) {
  const int64_t packs = n / W;
  for (int64_t p = thread_index(); p < packs; p += grid_size()) {
    f(p * W, std::integral_constant<int, W>{});
  }
  if constexpr (W > 1) {
    for (int64_t i = packs * W + thread_index(); i < n; i += grid_size()) {
      f(i, std::integral_constant<int, 1>{});
    }
  }
}

template <class T> __device__ inline T warp_sum(T v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

__device__ inline float warp_max(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Sum of v over the block (blockDim.x a multiple of 32, at most 1024),
// returned to every thread. `shared` holds 32 elements; every thread of the
// block must call this.
template <class T> __device__ T block_sum(T v, T* shared) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = warp_sum(v);
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : T(0);
  return warp_sum(v);
}

// Maximum of v over the block; same rules as block_sum.
__device__ inline float block_max(float v, float* shared) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : -INFINITY;
  return warp_max(v);
}

}  // namespace mixtrain::gpu
