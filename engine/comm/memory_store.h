// Why: the Store interface (blocking get, wait, add) in memory, over the
// KeyValueTable the coordinator's rendezvous store shares: TcpStoreServer
// serves this map to its clients, and ranks that are threads of one
// process can share one directly.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/comm/key_value_table.h"
#include "engine/comm/store.h"

namespace mixtrain {

// Thread-safe; every method may block only in get/wait, up to its timeout.
class MemoryStore final : public Store {
 public:
  void set(const std::string& key, std::string_view value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;

  // Wakes every blocked get/wait and makes them, and every later call,
  // throw EngineError(kUnavailable) "store closed": a server shutting down
  // must not wait for its clients' timeouts.
  void close();

 private:
  // Blocks until every key is set; returns the first missing key on
  // timeout, "" when all are present.
  std::string wait_locked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                          std::chrono::milliseconds timeout);
  void check_open_locked() const;

  std::mutex mu_;
  std::condition_variable changed_;
  KeyValueTable values_;  // GUARDED_BY(mu_)
  bool closed_ = false;   // GUARDED_BY(mu_)
};

// "key 'comm/gloo/2' was not set within 5 s": the timeout message every
// store uses.
std::string store_timeout_message(std::string_view key, std::chrono::milliseconds timeout);

}  // namespace mixtrain
