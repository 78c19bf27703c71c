// Why: see signal_watcher.h.
#include "worker/signal_watcher.h"

#include <pthread.h>
#include <signal.h>

#include <thread>

namespace mixtrain::worker {

void watch_signal(int signal, std::atomic<bool>* received) {
  sigset_t watched;
  sigemptyset(&watched);
  sigaddset(&watched, signal);
  ::pthread_sigmask(SIG_BLOCK, &watched, nullptr);
  std::thread([watched, received] {
    while (true) {
      int taken = 0;
      if (::sigwait(&watched, &taken) == 0) received->store(true);
    }
  }).detach();
}

}  // namespace mixtrain::worker
