// Why: see backoff.h.
#include "net/backoff.h"

#include <algorithm>

namespace mixtrain::net {

std::optional<Backoff::Duration> Backoff::next() {
  const Clock::time_point now = Clock::now();
  if (!failing_) {
    failing_ = true;
    failing_since_ = now;
  }
  if (give_up_after_ && now - failing_since_ > *give_up_after_) return std::nullopt;
  const Duration delay = next_;
  next_ = std::min(cap_, next_ * 2);
  return delay;
}

}  // namespace mixtrain::net
