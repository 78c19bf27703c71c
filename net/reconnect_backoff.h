// Why: `submit --follow`, `local` and `logs -f` must outlive a coordinator
// restart, and must not hammer it or wait forever while it is gone. This
// paces their reconnects the same way: 0.5 s doubling to 5 s, giving up
// after a set time without hearing from the coordinator.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>

namespace mixtrain::cli {

class ReconnectBackoff {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ReconnectBackoff(std::chrono::seconds give_up_after) : give_up_after_(give_up_after) {}

  // A call got through: the next loss starts the backoff afresh.
  void heard() {
    lost_ = false;
    wait_ = kFirstWait;
  }

  // True when no loss is pending since the last heard() (the next failure
  // is news worth telling the user).
  bool connected() const { return !lost_; }

  // After a failed connection: how long to wait before the next try, or
  // nullopt once give_up_after has passed since the first failure.
  std::optional<Clock::duration> next_wait() {
    const Clock::time_point now = Clock::now();
    if (!lost_) {
      lost_ = true;
      lost_since_ = now;
    }
    if (now - lost_since_ > give_up_after_) return std::nullopt;
    const Clock::duration wait = wait_;
    wait_ = std::min<Clock::duration>(wait_ * 2, kLongestWait);
    return wait;
  }

 private:
  static constexpr Clock::duration kFirstWait = std::chrono::milliseconds(500);
  static constexpr Clock::duration kLongestWait = std::chrono::seconds(5);

  const std::chrono::seconds give_up_after_;
  bool lost_ = false;               // a failure since the last heard()
  Clock::time_point lost_since_{};  // the first such failure
  Clock::duration wait_ = kFirstWait;
};

}  // namespace mixtrain::cli
