// Why: how the CPU ops share work among OpenMP threads. Work is cut into
// chunks whose boundaries depend only on the problem size, never on the
// thread count, so a reduction combined chunk by chunk in chunk order gives
// the same bits on 1 thread or 64. Per-thread fp32 scratch comes from the
// backend's workspace, so kernel scratch is counted like every other byte.
#pragma once

#include <algorithm>
#include <cstdint>

#include "engine/backend/backend.h"

namespace mixtrain::cpu_ops {

// Number of chunks of `chunk` elements that cover n elements.
inline int64_t chunk_count(int64_t n, int64_t chunk) { return (n + chunk - 1) / chunk; }

// Calls body(begin, count) for each consecutive chunk of [0, n) (`chunk`
// elements, the last one shorter), chunks spread statically over OpenMP
// threads. body must not throw.
template <class Body>
void parallel_chunks(int64_t n, int64_t chunk, Body&& body) {
  const int64_t chunks = chunk_count(n, chunk);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * chunk;
    body(begin, std::min(chunk, n - begin));
  }
}

// fp32 scratch for each OpenMP thread of the calling thread's next team,
// counted in `backend` as kWorkspace for this object's lifetime.
class ThreadScratch {
 public:
  ThreadScratch(Backend& backend, int64_t floats_per_thread);
  // The calling OpenMP thread's floats_per_thread floats (64-byte aligned).
  float* mine() const;

 private:
  int64_t stride_;  // floats_per_thread rounded up to whole cache lines
  Tensor storage_;
  float* base_;
};

}  // namespace mixtrain::cpu_ops
