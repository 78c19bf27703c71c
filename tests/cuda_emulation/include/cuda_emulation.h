// Why: lets g++ compile the kernel sources that rewrite_launches.py wrote
// (it is force-included with -include): the CUDA keywords become plain
// C++, and the device intrinsics the kernels use get host versions that
// keep CUDA's rules, stopping with a message where a kernel breaks them
// (a full-mask shuffle in a warp with exited lanes, for one). Conversions
// (__float2half_rn, __nv_cvt_float_to_fp8, ...) are the CUDA headers' own
// host implementations.
#pragma once

#define __host__
#define __device__
#define __global__
#define __forceinline__ inline
// rewrite_launches.py gives every __shared__ variable one instance per
// multiprocessor; one it could not rewrite must not compile as a local.
#define __shared__ __shared___declaration_not_rewritten_by_rewrite_launches_py

#include <cuda_runtime.h>
#include <math.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "emulated_device.h"

// A barrier that some threads of the block exited before reaching is a
// conditional __syncthreads, which CUDA leaves undefined.
inline void __syncthreads() {
  if (emu::Multiprocessor::current().block_barrier().arrive_and_wait() != blockDim.x) {
    emu::device_fault("__syncthreads: not reached by every thread of the block");
  }
}

// Every lane publishes v, the warp meets, every lane reads its partner's
// (Warp explains the two buffers).
template <class T> T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
  static_assert(sizeof(T) <= sizeof(uint64_t));
  if (mask != 0xffffffffu) emu::device_fault("__shfl_xor_sync: only the full mask is emulated");
  emu::Multiprocessor& mp = emu::Multiprocessor::current();
  emu::Warp& warp = mp.warp(threadIdx.x / emu::kWarpSize);
  uint64_t* exchange = warp.exchange[mp.running().shuffles_done++ % 2];
  const unsigned lane = threadIdx.x % emu::kWarpSize;
  std::memcpy(&exchange[lane], &v, sizeof(T));
  if (warp.barrier.arrive_and_wait() != emu::kWarpSize) {
    emu::device_fault("__shfl_xor_sync: full mask, but not all 32 lanes of the warp are running");
  }
  T other;
  std::memcpy(&other, &exchange[lane ^ static_cast<unsigned>(lane_mask)], sizeof(T));
  return other;
}

inline unsigned long long atomicMin(unsigned long long* address, unsigned long long value) {
  std::atomic_ref<unsigned long long> target(*address);
  unsigned long long old = target.load();
  while (value < old && !target.compare_exchange_weak(old, value)) {
  }
  return old;
}

inline unsigned int atomicMax(unsigned int* address, unsigned int value) {
  std::atomic_ref<unsigned int> target(*address);
  unsigned int old = target.load();
  while (value > old && !target.compare_exchange_weak(old, value)) {
  }
  return old;
}

inline unsigned long long atomicAdd(unsigned long long* address, unsigned long long value) {
  return std::atomic_ref<unsigned long long>(*address).fetch_add(value);
}

inline unsigned int __float_as_uint(float f) {
  unsigned int bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

inline float __uint_as_float(unsigned int bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// CUDA's integer min (a device overload of the global name).
template <class T> T min(T a, T b) { return b < a ? b : a; }
template <class T>
T max(T a, T b) {
  return a < b ? b : a;
}
