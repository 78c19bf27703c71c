// Why: freeing CUDA memory with cudaFree/cudaFreeHost waits for the whole
// device, and a training step frees hundreds of tensors (activations,
// gradient buckets, gathered weights), so every free stalled the step.
// CudaMemory owns the backend's two streams and hands out memory that is
// freed without any synchronisation: device memory from the device's
// stream-ordered pool (cudaMallocAsync/cudaFreeAsync on the compute
// stream, kept by the pool between steps), pinned host memory from a cache
// of blocks that are reused once the GPU work queued before their free is
// done. The memory tracker still counts each tensor's own bytes (Storage
// does that), so what the pools keep in reserve is not counted as used.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine/backend/tensor.h"

namespace mixtrain {

class CudaMemory final : public Allocator {
 public:
  // Takes device `device` and creates its compute and transfer streams.
  // Throws EngineError(kUnavailable) when the device cannot be used.
  explicit CudaMemory(int device);
  // Waits for the device, then returns every cached block and the pool's
  // reserve to the driver and destroys the streams.
  ~CudaMemory() override;
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;

  int device() const { return device_; }
  // Keeps `bytes` of the device for allocations outside the pool: the
  // pool's release threshold becomes the device's memory less `bytes`, so
  // at each synchronisation it gives the driver back what it holds beyond
  // that. The constructor leaves device_reserve(1): one rank's runtime.
  void leave_free(int64_t bytes);
  // Every op's stream, and the stream of copies that overlap it.
  cudaStream_t compute() const { return compute_; }
  cudaStream_t transfer() const { return transfer_; }

  // Says that work enqueued on the transfer stream may use device memory:
  // the next device free is then ordered after it (frees are compute-stream
  // ordered). Call it after enqueueing that work, never before: a free on
  // another thread may take the note at any moment and fence only what the
  // transfer stream holds by then.
  void note_transfer_use() { transfer_used_.store(true, std::memory_order_release); }

  // Device memory is allocated and freed on the compute stream, in order
  // with its work: no call blocks, except when the device is full: then
  // the streams are waited for, the pool's free memory is given back and
  // the allocation is tried once more before it fails (kOutOfMemory). Host memory: a cached pinned block of at
  // least `bytes` whose queued GPU work is done, else a new one.
  void* allocate(size_t bytes, MemoryPool pool) override;
  void deallocate(void* ptr, size_t bytes, MemoryPool pool) override;
  DeviceType device_type(MemoryPool pool) const override;

  // Pinned bytes held by freed host blocks, kept for reuse.
  size_t cached_host_bytes() const;

 private:
  // A freed pinned block, reusable once both streams passed its events.
  struct FreeHostBlock {
    void* ptr;
    size_t capacity;
    cudaEvent_t compute_done;
    cudaEvent_t transfer_done;
  };

  void* allocate_device(size_t bytes);
  void* allocate_host(size_t bytes);
  void free_device(void* ptr);
  void free_host(void* ptr);
  // A cached block of capacity in [bytes, 2 * bytes] whose events have
  // passed, or nullptr. Needs mu_.
  void* reuse_host_block(size_t bytes);
  // Returns the cached blocks whose events have passed to the driver.
  // Needs mu_.
  void release_idle_host_blocks();

  const int device_;
  bool pools_supported_ = false;  // cudaMallocAsync is available
  cudaStream_t compute_ = nullptr;
  cudaStream_t transfer_ = nullptr;
  cudaEvent_t transfer_fence_ = nullptr;  // orders device frees after transfer work
  std::atomic<bool> transfer_used_{false};
  mutable std::mutex mu_;
  std::unordered_map<void*, size_t> host_capacity_;  // live pinned blocks
  std::vector<FreeHostBlock> free_host_;
};

}  // namespace mixtrain
