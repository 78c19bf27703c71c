// Why: see memory_store.h. One condition variable for all keys: stores are
// small and touched a few times per run, so waking every waiter on each
// set costs nothing and keeps the code obvious.
#include "engine/comm/memory_store.h"

#include "engine/socket/socket_io.h"
#include "engine/common/error.h"

namespace mixtrain {

std::string store_timeout_message(std::string_view key, std::chrono::milliseconds timeout) {
  return "store: key '" + std::string(key) + "' was not set within " + format_seconds(timeout) +
         " s";
}

void MemoryStore::check_open_locked() const {
  if (closed_) throw EngineError(ErrorCode::kUnavailable, "store closed");
}

void MemoryStore::set(const std::string& key, std::string_view value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    check_open_locked();
    values_.set(key, value);
  }
  changed_.notify_all();
}

std::string MemoryStore::wait_locked(std::unique_lock<std::mutex>& lock,
                                     const std::vector<std::string>& keys,
                                     std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    check_open_locked();
    const std::string* missing = values_.first_missing(keys);
    if (missing == nullptr) return "";
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      check_open_locked();
      if (values_.find(*missing) == nullptr) return *missing;
    }
  }
}

std::string MemoryStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!wait_locked(lock, {key}, timeout).empty()) {
    throw EngineError(ErrorCode::kUnavailable, store_timeout_message(key, timeout));
  }
  return *values_.find(key);
}

void MemoryStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const std::string missing = wait_locked(lock, keys, timeout);
  if (!missing.empty()) {
    throw EngineError(ErrorCode::kUnavailable, store_timeout_message(missing, timeout));
  }
}

int64_t MemoryStore::add(const std::string& key, int64_t delta) {
  std::optional<int64_t> value;
  {
    std::lock_guard<std::mutex> lock(mu_);
    check_open_locked();
    value = values_.add(key, delta);
  }
  if (!value) {
    throw EngineError(ErrorCode::kInvalidArgument,
                      "store: add to key '" + key + "', which holds a non-integer value");
  }
  changed_.notify_all();
  return *value;
}

void MemoryStore::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  changed_.notify_all();
}

}  // namespace mixtrain
