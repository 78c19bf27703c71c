// Why: when the coordinator goes away (restart, network), the agent and the
// task process keep retrying; delays that double from a short start up to
// a small cap reconnect within ~2 s of its return without hammering it.
#pragma once

#include <chrono>

namespace mixtrain::worker {

class Backoff {
 public:
  // Delays start at `initial` and double up to `cap`.
  explicit Backoff(std::chrono::milliseconds initial = std::chrono::milliseconds(100),
                   std::chrono::milliseconds cap = std::chrono::milliseconds(2000))
      : initial_(initial), cap_(cap), next_(initial) {}

  // The delay to wait before the next attempt; each call doubles the one
  // after it, up to the cap.
  std::chrono::milliseconds next();

  // Back to the initial delay (after a success).
  void reset() { next_ = initial_; }

 private:
  std::chrono::milliseconds initial_;
  std::chrono::milliseconds cap_;
  std::chrono::milliseconds next_;
};

}  // namespace mixtrain::worker
