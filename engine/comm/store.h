// Why: ranks find each other (Gloo addresses, the NCCL unique id, failure
// reports) through a small key-value store, shaped like
// gloo::rendezvous::Store so any store can back a Gloo rendezvous: the
// launcher's TCP store for `mixtrain train --nproc N` and the tests, an
// in-process one for threads, later the coordinator's. Every blocking call
// has a timeout, so a rank whose peers never come fails instead of hanging.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mixtrain {

class Store {
 public:
  virtual ~Store() = default;

  // Stores `value` (any bytes) under `key`, replacing an earlier value, and
  // wakes every get/wait for it.
  virtual void set(const std::string& key, std::string_view value) = 0;

  // The value of `key`, waiting up to `timeout` for some rank to set it.
  // Throws EngineError(kUnavailable) naming the key when it was not set in
  // time or the store cannot be reached.
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;

  // Returns once every key is set. Throws EngineError(kUnavailable) naming
  // the first missing key when `timeout` passes first.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;

  // Adds `delta` to the integer under `key` (absent counts as 0), stores it
  // as decimal text and returns the new value: counters and barriers.
  // Throws EngineError(kInvalidArgument) when the key holds something that
  // is not an integer.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
};

}  // namespace mixtrain
