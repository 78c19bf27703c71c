// Why: every client of the coordinator (the worker agent, its reporter and
// rendezvous store, the CLI's followers) must outlive a coordinator restart
// or a network outage without hammering it, and some must give up after a
// while. One pacing for all of them: delays that double from `initial` up
// to `cap`, and, when asked, an end once an outage has lasted too long.
// The agent uses 100 ms to kReconnectCap (service_timing.h: it reconnects
// within that of the coordinator's return); the CLI 0.5 s to 5 s, giving
// up after minutes.
#pragma once

#include <chrono>
#include <optional>

#include "net/service_timing.h"

namespace mixtrain::net {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;
  using Duration = std::chrono::milliseconds;

  // Delays start at `initial` and double up to `cap`. With give_up_after,
  // next() returns nullopt once that much time has passed since the first
  // failure after the last reset().
  explicit Backoff(Duration initial = std::chrono::milliseconds(100),
                   Duration cap = kReconnectCap,
                   std::optional<Clock::duration> give_up_after = std::nullopt)
      : initial_(initial), cap_(cap), give_up_after_(give_up_after), next_(initial) {}

  // After a failure: the delay to wait before the next attempt (each call
  // doubles the one after it, up to the cap), or nullopt when the outage
  // has outlasted give_up_after.
  std::optional<Duration> next();

  // A success: the next failure starts a new outage at the initial delay.
  void reset() {
    failing_ = false;
    next_ = initial_;
  }

  // True when no failure came since the last reset() (so the next one is
  // news worth telling the user).
  bool connected() const { return !failing_; }

 private:
  Duration initial_;
  Duration cap_;
  std::optional<Clock::duration> give_up_after_;
  Duration next_;
  bool failing_ = false;           // a failure since the last reset()
  Clock::time_point failing_since_{};  // the first such failure
};

}  // namespace mixtrain::net
