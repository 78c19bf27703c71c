// Why: every byte the engine allocates is tagged with one category and one
// pool, and the summary JSON, the memory metrics and the ZeRO memory tests
// all read this tracker, so its counts must be exact to the byte.
#pragma once

#include <array>
#include <cstddef>
#include <mutex>
#include <string>

#include "engine/common/error.h"

namespace mixtrain {

// device: the compute memory (GPU memory on CUDA, the engine's compute pool
// on the CPU backend). host: the offload pool.
enum class MemoryPool : int { kDevice = 0, kHost = 1 };
inline constexpr int kNumMemoryPools = 2;

enum class MemoryCategory : int {
  kParams = 0,      // 16-bit (compute-dtype) working weights
  kGrads,           // gradients
  kMasterParams,    // fp32 master weights
  kOptimizerState,  // AdamW moments
  kActivations,     // saved forward activations and their gradients
  kGatheredParams,  // ZeRO-3 parameters gathered for one layer
  kCommBuffers,     // collective staging buffers
  kWorkspace,       // kernel scratch (converted GEMM inputs, attention temps)
  kData,            // training tokens held in process memory (not mapped from a file)
};
inline constexpr int kNumMemoryCategories = 9;

// `bytes` as "1.5 GiB" (three significant digits), for messages.
std::string gib_text(double bytes);

// "device" / "host": the summary JSON's and metrics' names.
const char* memory_pool_name(MemoryPool pool);
// "params", "grads", "master_params", "optimizer_state", "activations",
// "gathered_params", "comm_buffers", "workspace", "data".
const char* memory_category_name(MemoryCategory category);

// Whether the engine ever places `category` in `pool`, which the summary
// JSON and the metrics list: on the device every category but data; on the
// host what offload moves there (master_params, optimizer_state, params)
// and data (tokens held in process memory are always in RAM).
bool memory_category_in_pool(MemoryPool pool, MemoryCategory category);

class MemoryTracker;

// The EngineError(kOutOfMemory) for `bytes` more of `category` in `pool`
// that did not fit: names the category and the pool, what the pool holds
// and its peaks by category (as the summary gives them), and `cause`.
EngineError out_of_memory_error(const MemoryTracker& tracker, size_t bytes, MemoryPool pool,
                                MemoryCategory category, const std::string& cause);

// Current and peak bytes per (pool, category), and the peak of each pool's
// total. Thread-safe.
class MemoryTracker {
 public:
  // Records an allocation of `bytes` in (pool, category).
  void on_alloc(MemoryPool pool, MemoryCategory category, size_t bytes);
  // Records that an allocation of `bytes` in (pool, category) was freed.
  // Freeing more than is outstanding is a bug and aborts in debug builds.
  void on_free(MemoryPool pool, MemoryCategory category, size_t bytes);

  // Bytes outstanding now in (pool, category).
  size_t current(MemoryPool pool, MemoryCategory category) const;
  // Highest value current(pool, category) has reached since the last reset.
  size_t peak(MemoryPool pool, MemoryCategory category) const;
  // Bytes outstanding now in the pool, over all categories.
  size_t current_total(MemoryPool pool) const;
  // Highest value current_total(pool) has reached since the last reset.
  size_t peak_total(MemoryPool pool) const;
  // Sets every peak to its current value.
  void reset_peaks();

  // Bytes the pools that live in RAM may hold together (a rank: its
  // worker's --memory-limit): both pools when `device_in_ram` (the CPU
  // backend), else the host pool alone; 0 lifts the limit. Allocations
  // past it fail as out of memory, before the kernel would kill the
  // process for them.
  void set_ram_limit(size_t bytes, bool device_in_ram);
  size_t ram_limit() const;
  // False when `bytes` more in `pool` would pass the RAM limit.
  bool within_ram_limit(MemoryPool pool, size_t bytes) const;
  // Throws out_of_memory_error(..., "past this rank's memory limit of ...")
  // when `bytes` more of `category` in `pool` would pass the RAM limit.
  void check_ram_limit(MemoryPool pool, MemoryCategory category, size_t bytes) const;

 private:
  struct PoolCounts {
    std::array<size_t, kNumMemoryCategories> current{};
    std::array<size_t, kNumMemoryCategories> peak{};
    size_t total = 0;
    size_t peak_total = 0;
  };
  mutable std::mutex mu_;
  std::array<PoolCounts, kNumMemoryPools> pools_;  // GUARDED_BY(mu_)
  size_t ram_limit_ = 0;                           // GUARDED_BY(mu_)
  bool device_in_ram_ = false;                     // GUARDED_BY(mu_)
};

}  // namespace mixtrain
