// Why: the store's data semantics exist once. Two stores hold the keys of
// a rendezvous: MemoryStore (behind the launcher's TCP store and in-process
// ranks), whose get and wait block a thread, and the coordinator's
// RendezvousStore, whose waits are callbacks because they must not hold a
// gRPC thread. How they wait differs on purpose; what a key holds, when a
// wait is satisfied and what `add` does to a value must not, and live
// here. Not thread-safe: each store guards its table with its own lock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mixtrain {

class KeyValueTable {
 public:
  // Stores `value` under `key`, replacing an earlier one.
  void set(const std::string& key, std::string_view value) { values_[key] = std::string(value); }

  // The value of `key`, or nullptr when it is not set.
  const std::string* find(std::string_view key) const;

  // The first of `keys` that is not set, or nullptr when all are: a wait
  // for `keys` is satisfied exactly when this is nullptr.
  const std::string* first_missing(const std::vector<std::string>& keys) const;

  // Adds `delta` to the decimal integer under `key` (unset counts as 0),
  // stores the sum as decimal text and returns it; nullopt (and nothing
  // changed) when the key holds anything but an integer.
  std::optional<int64_t> add(const std::string& key, int64_t delta);

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

}  // namespace mixtrain
