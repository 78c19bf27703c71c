// Why: see backoff.h.
#include "net/backoff.h"

#include <algorithm>

namespace mixtrain::worker {

std::chrono::milliseconds Backoff::next() {
  const std::chrono::milliseconds delay = next_;
  next_ = std::min(cap_, next_ * 2);
  return delay;
}

}  // namespace mixtrain::worker
