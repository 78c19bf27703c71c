// Why: implementation of the exact per-category memory counts.
#include "engine/backend/memory_tracker.h"

#include <algorithm>
#include <cassert>
#include <cstdio>

namespace mixtrain {

std::string gib_text(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g GiB", bytes / double(1 << 30));
  return text;
}

const char* memory_pool_name(MemoryPool pool) {
  return pool == MemoryPool::kDevice ? "device" : "host";
}

const char* memory_category_name(MemoryCategory category) {
  static constexpr const char* kNames[kNumMemoryCategories] = {
      "params",          "grads",       "master_params",
      "optimizer_state", "activations", "gathered_params",
      "comm_buffers",    "workspace",   "data"};
  return kNames[static_cast<int>(category)];
}

bool memory_category_in_pool(MemoryPool pool, MemoryCategory category) {
  if (pool == MemoryPool::kDevice) return category != MemoryCategory::kData;
  return category == MemoryCategory::kMasterParams || category == MemoryCategory::kOptimizerState ||
         category == MemoryCategory::kParams || category == MemoryCategory::kData;
}

void MemoryTracker::on_alloc(MemoryPool pool, MemoryCategory category, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  PoolCounts& p = pools_[static_cast<int>(pool)];
  const int c = static_cast<int>(category);
  p.current[c] += bytes;
  p.peak[c] = std::max(p.peak[c], p.current[c]);
  p.total += bytes;
  p.peak_total = std::max(p.peak_total, p.total);
}

void MemoryTracker::set_ram_limit(size_t bytes, bool device_in_ram) {
  std::lock_guard<std::mutex> lock(mu_);
  ram_limit_ = bytes;
  device_in_ram_ = device_in_ram;
}

size_t MemoryTracker::ram_limit() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ram_limit_;
}

bool MemoryTracker::within_ram_limit(MemoryPool pool, size_t bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (ram_limit_ == 0 || (pool == MemoryPool::kDevice && !device_in_ram_)) return true;
  size_t held = pools_[static_cast<int>(MemoryPool::kHost)].total;
  if (device_in_ram_) held += pools_[static_cast<int>(MemoryPool::kDevice)].total;
  return held + bytes <= ram_limit_;
}

void MemoryTracker::check_ram_limit(MemoryPool pool, MemoryCategory category, size_t bytes) const {
  if (within_ram_limit(pool, bytes)) return;
  throw out_of_memory_error(*this, bytes, pool, category,
                            "past this rank's memory limit of " + gib_text(double(ram_limit())) +
                                " (its worker's --memory-limit)");
}

EngineError out_of_memory_error(const MemoryTracker& tracker, size_t bytes, MemoryPool pool,
                                MemoryCategory category, const std::string& cause) {
  std::string peaks;
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    const auto held = static_cast<MemoryCategory>(c);
    if (tracker.peak(pool, held) == 0) continue;
    peaks += std::string(peaks.empty() ? "" : ", ") + memory_category_name(held) + " " +
             gib_text(double(tracker.peak(pool, held)));
  }
  return EngineError(ErrorCode::kOutOfMemory,
                     "out of memory: needed " + gib_text(double(bytes)) + " more for " +
                         memory_category_name(category) + " in the " + memory_pool_name(pool) +
                         " pool, which holds " + gib_text(double(tracker.current_total(pool))) +
                         " already; peak by category: " + (peaks.empty() ? "none" : peaks) +
                         " (`mixtrain plan` shows what each setting needs: zero.stage, offload, "
                         "train.activation_checkpointing, train.micro_batch; " +
                         cause + ")");
}

void MemoryTracker::on_free(MemoryPool pool, MemoryCategory category, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  PoolCounts& p = pools_[static_cast<int>(pool)];
  const int c = static_cast<int>(category);
  assert(p.current[c] >= bytes && "freeing more than was allocated");
  p.current[c] -= bytes;
  p.total -= bytes;
}

size_t MemoryTracker::current(MemoryPool pool, MemoryCategory category) const {
  std::lock_guard<std::mutex> lock(mu_);
  return pools_[static_cast<int>(pool)].current[static_cast<int>(category)];
}

size_t MemoryTracker::peak(MemoryPool pool, MemoryCategory category) const {
  std::lock_guard<std::mutex> lock(mu_);
  return pools_[static_cast<int>(pool)].peak[static_cast<int>(category)];
}

size_t MemoryTracker::current_total(MemoryPool pool) const {
  std::lock_guard<std::mutex> lock(mu_);
  return pools_[static_cast<int>(pool)].total;
}

size_t MemoryTracker::peak_total(MemoryPool pool) const {
  std::lock_guard<std::mutex> lock(mu_);
  return pools_[static_cast<int>(pool)].peak_total;
}

void MemoryTracker::reset_peaks() {
  std::lock_guard<std::mutex> lock(mu_);
  for (PoolCounts& p : pools_) {
    p.peak = p.current;
    p.peak_total = p.total;
  }
}

}  // namespace mixtrain
