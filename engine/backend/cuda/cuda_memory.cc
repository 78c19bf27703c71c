// Why: see cuda_memory.h.
#include "engine/backend/cuda/cuda_memory.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "engine/backend/cuda/cuda_error.h"
#include "engine/backend/device_reserve.h"
#include "engine/common/error.h"

namespace mixtrain {
namespace {

// Every block starts on this alignment (cudaMalloc's own), and zero-byte
// tensors still get a distinct, valid address.
constexpr size_t kMinBlock = 256;

void create_stream(cudaStream_t* stream) {
  MIXTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking));
}

EngineError allocation_error(int device, const char* call, size_t bytes, cudaError_t status) {
  (void)cudaGetLastError();
  return EngineError(
      status == cudaErrorMemoryAllocation ? ErrorCode::kOutOfMemory : ErrorCode::kInternal,
      "cuda:" + std::to_string(device) + ": " + call + " of " + std::to_string(bytes) +
          " bytes failed: " + cudaGetErrorString(status));
}

}  // namespace

CudaMemory::CudaMemory(int device) : device_(device) {
  const cudaError_t status = cudaSetDevice(device_);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    throw EngineError(ErrorCode::kUnavailable, "cuda:" + std::to_string(device_) +
                                                   ": cannot use the device: " +
                                                   cudaGetErrorString(status));
  }
  int pools = 0;
  MIXTRAIN_CUDA_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device_));
  pools_supported_ = pools != 0;
  if (pools_supported_) {
    // By default the pool gives its free memory back to the driver at every
    // synchronisation, and the next step allocates it again; keep all but
    // what the runtime needs beside it.
    leave_free(device_reserve(1).total());
  }
  create_stream(&compute_);
  create_stream(&transfer_);
  MIXTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&transfer_fence_, cudaEventDisableTiming));
}

CudaMemory::~CudaMemory() {
  // Errors are dropped: this may run after the driver has shut down.
  (void)cudaSetDevice(device_);
  (void)cudaDeviceSynchronize();
  {
    std::lock_guard lock(mu_);
    release_idle_host_blocks();  // every one: the device is idle
  }
  if (pools_supported_) {
    cudaMemPool_t pool = nullptr;
    if (cudaDeviceGetDefaultMemPool(&pool, device_) == cudaSuccess) (void)cudaMemPoolTrimTo(pool, 0);
  }
  (void)cudaEventDestroy(transfer_fence_);
  (void)cudaStreamDestroy(transfer_);
  (void)cudaStreamDestroy(compute_);
  (void)cudaGetLastError();
}

void CudaMemory::leave_free(int64_t bytes) {
  if (!pools_supported_) return;  // cudaMalloc's memory goes back at each free
  MIXTRAIN_CUDA_CHECK(cudaSetDevice(device_));
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  MIXTRAIN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const uint64_t total = total_bytes;
  const uint64_t left = static_cast<uint64_t>(std::max<int64_t>(0, bytes));
  uint64_t threshold = total > left ? total - left : 0;
  cudaMemPool_t pool = nullptr;
  MIXTRAIN_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device_));
  MIXTRAIN_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
}

DeviceType CudaMemory::device_type(MemoryPool pool) const {
  return pool == MemoryPool::kDevice ? DeviceType::kCuda : DeviceType::kCpu;
}

void* CudaMemory::allocate(size_t bytes, MemoryPool pool) {
  MIXTRAIN_CUDA_CHECK(cudaSetDevice(device_));
  const size_t size = std::max(bytes, kMinBlock);
  return pool == MemoryPool::kDevice ? allocate_device(size) : allocate_host(size);
}

void CudaMemory::deallocate(void* ptr, size_t, MemoryPool pool) {
  // Errors are dropped: this runs inside destructors, possibly after the
  // driver has shut down.
  (void)cudaSetDevice(device_);
  if (pool == MemoryPool::kDevice) {
    free_device(ptr);
  } else {
    free_host(ptr);
  }
  (void)cudaGetLastError();
}

void* CudaMemory::allocate_device(size_t bytes) {
  void* ptr = nullptr;
  cudaError_t status =
      pools_supported_ ? cudaMallocAsync(&ptr, bytes, compute_) : cudaMalloc(&ptr, bytes);
  if (status == cudaErrorMemoryAllocation && pools_supported_) {
    // Between synchronisations the pool keeps every block freed to it, so
    // the device may be full of the pool's free memory while a larger block
    // is asked for, or NCCL and cuBLAS allocate outside it. Let both
    // streams pass the frees queued on them, give the pool's free memory
    // back to the driver, and try once more.
    (void)cudaGetLastError();
    (void)cudaStreamSynchronize(transfer_);
    (void)cudaStreamSynchronize(compute_);
    cudaMemPool_t pool = nullptr;
    if (cudaDeviceGetDefaultMemPool(&pool, device_) == cudaSuccess) (void)cudaMemPoolTrimTo(pool, 0);
    status = cudaMallocAsync(&ptr, bytes, compute_);
  }
  if (status != cudaSuccess) {
    throw allocation_error(device_, pools_supported_ ? "cudaMallocAsync" : "cudaMalloc", bytes,
                           status);
  }
  return ptr;
}

void CudaMemory::free_device(void* ptr) {
  if (!pools_supported_) {  // a device without memory pools: the old, blocking way
    (void)cudaDeviceSynchronize();
    (void)cudaFree(ptr);
    return;
  }
  // The block returns to the pool in compute-stream order: later work on
  // that stream may reuse it, earlier work still reads it undisturbed.
  // Copies on the transfer stream are ordered in front of it first.
  if (transfer_used_.exchange(false, std::memory_order_acq_rel)) {
    std::lock_guard lock(mu_);
    if (cudaEventRecord(transfer_fence_, transfer_) == cudaSuccess) {
      (void)cudaStreamWaitEvent(compute_, transfer_fence_, 0);
    }
  }
  (void)cudaFreeAsync(ptr, compute_);
}

void* CudaMemory::allocate_host(size_t bytes) {
  std::lock_guard lock(mu_);
  if (void* ptr = reuse_host_block(bytes)) return ptr;
  void* ptr = nullptr;
  cudaError_t status = cudaMallocHost(&ptr, bytes);
  if (status == cudaErrorMemoryAllocation) {  // the cache may hold what is missing
    (void)cudaGetLastError();
    release_idle_host_blocks();
    status = cudaMallocHost(&ptr, bytes);
  }
  if (status != cudaSuccess) throw allocation_error(device_, "cudaMallocHost", bytes, status);
  host_capacity_[ptr] = bytes;
  return ptr;
}

void CudaMemory::free_host(void* ptr) {
  std::lock_guard lock(mu_);
  const auto live = host_capacity_.find(ptr);
  if (live == host_capacity_.end()) return;  // not ours: nothing to give back
  FreeHostBlock block{ptr, live->second, nullptr, nullptr};
  host_capacity_.erase(live);
  // Copies queued on either stream may still read or write the block.
  const bool recorded =
      cudaEventCreateWithFlags(&block.compute_done, cudaEventDisableTiming) == cudaSuccess &&
      cudaEventCreateWithFlags(&block.transfer_done, cudaEventDisableTiming) == cudaSuccess &&
      cudaEventRecord(block.compute_done, compute_) == cudaSuccess &&
      cudaEventRecord(block.transfer_done, transfer_) == cudaSuccess;
  if (!recorded) {  // cannot tell when it is free: wait, then give it back
    (void)cudaDeviceSynchronize();
    if (block.compute_done != nullptr) (void)cudaEventDestroy(block.compute_done);
    if (block.transfer_done != nullptr) (void)cudaEventDestroy(block.transfer_done);
    (void)cudaFreeHost(ptr);
    return;
  }
  free_host_.push_back(block);
}

void* CudaMemory::reuse_host_block(size_t bytes) {
  auto best = free_host_.end();
  for (auto it = free_host_.begin(); it != free_host_.end(); ++it) {
    if (it->capacity < bytes || it->capacity / 2 > bytes) continue;
    if (best != free_host_.end() && best->capacity <= it->capacity) continue;
    if (cudaEventQuery(it->compute_done) != cudaSuccess ||
        cudaEventQuery(it->transfer_done) != cudaSuccess) {
      (void)cudaGetLastError();  // cudaErrorNotReady
      continue;
    }
    best = it;
  }
  if (best == free_host_.end()) return nullptr;
  FreeHostBlock block = *best;
  free_host_.erase(best);
  (void)cudaEventDestroy(block.compute_done);
  (void)cudaEventDestroy(block.transfer_done);
  host_capacity_[block.ptr] = block.capacity;
  return block.ptr;
}

void CudaMemory::release_idle_host_blocks() {
  std::erase_if(free_host_, [](const FreeHostBlock& block) {
    if (cudaEventQuery(block.compute_done) != cudaSuccess ||
        cudaEventQuery(block.transfer_done) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    (void)cudaEventDestroy(block.compute_done);
    (void)cudaEventDestroy(block.transfer_done);
    (void)cudaFreeHost(block.ptr);
    return true;
  });
}

size_t CudaMemory::cached_host_bytes() const {
  std::lock_guard lock(mu_);
  size_t total = 0;
  for (const FreeHostBlock& block : free_host_) total += block.capacity;
  return total;
}

}  // namespace mixtrain
