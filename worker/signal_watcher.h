// Why: oneDNN's JIT GEMM kernels (2.x, and 3.x before 3.11.2) point rsp
// into a heap buffer while they run, so a signal handled on a thread
// inside one has its frame written into the heap (oneDNN issue 4845).
// That was issue 29's heap corruption: the ranks of a preempted job
// handled SIGUSR1 on whatever thread it hit, and on CPUs whose GEMMs take
// those kernels (AVX2: bf16 products staged in fp32) a rank aborted
// ("corrupted size vs. prev_size") or silently resumed from damaged
// weights. A rank therefore never handles a signal: the one it watches
// stays blocked in every thread and one thread takes it with sigwait,
// which writes no frame anywhere.
#pragma once

#include <atomic>

namespace mixtrain::worker {

// Blocks `signal` in the calling thread and starts a thread that sets
// `*received` each time the process gets it. Call it before any other
// thread starts (each inherits the blocked mask, so none of them ever runs
// a handler for it); the watching thread lives until the process exits.
void watch_signal(int signal, std::atomic<bool>* received);

}  // namespace mixtrain::worker
