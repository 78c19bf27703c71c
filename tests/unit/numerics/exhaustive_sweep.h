// Why: the exhaustive tests visit all 2^32 fp32 bit patterns; this runs
// that sweep in chunks on every core (OpenMP) and collects mismatches
// without stopping at the first, so one run shows how wide a bug is.
#pragma once

#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "engine/numerics/convert_kernels.h"

namespace mixtrain::testing {

inline constexpr size_t kSweepChunk = size_t{1} << 20;

// Counts mismatches across threads and keeps the first few descriptions.
class MismatchLog {
 public:
  void record(const std::string& path, uint32_t input_bits, uint32_t got, uint32_t expected) {
    count_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mu_);
    if (examples_.size() >= kMaxExamples) return;
    char line[160];
    std::snprintf(line, sizeof(line), "%s: fp32 0x%08x -> 0x%x, expected 0x%x\n", path.c_str(),
                  input_bits, got, expected);
    examples_ += line;
  }
  uint64_t count() const { return count_.load(); }
  std::string examples() const {
    std::lock_guard<std::mutex> lock(mu_);
    return examples_;
  }

 private:
  static constexpr size_t kMaxExamples = 10;
  std::atomic<uint64_t> count_{0};
  mutable std::mutex mu_;
  std::string examples_;  // GUARDED_BY(mu_)
};

// Records every i where got[i] != expected[i] for inputs begin_bits + i.
template <class Code>
void compare_codes(const std::string& path, uint32_t begin_bits, const Code* got,
                   const Code* expected, size_t count, MismatchLog& log) {
  if (std::memcmp(got, expected, count * sizeof(Code)) == 0) return;
  for (size_t i = 0; i < count; ++i) {
    if (got[i] != expected[i]) {
      log.record(path, begin_bits + static_cast<uint32_t>(i), got[i], expected[i]);
    }
  }
}

// Calls visit(begin_bits, inputs) for consecutive chunks of kSweepChunk fp32
// patterns covering all 2^32, in parallel; inputs[i] == begin_bits + i.
// Returns the wall time in seconds.
template <class Visit>
double sweep_all_fp32(Visit visit) {
  constexpr size_t kChunks = (size_t{1} << 32) / kSweepChunk;
  auto start = std::chrono::steady_clock::now();
#pragma omp parallel
  {
    std::vector<uint32_t> inputs(kSweepChunk);
#pragma omp for schedule(dynamic, 8)
    for (size_t c = 0; c < kChunks; ++c) {
      auto begin = static_cast<uint32_t>(c * kSweepChunk);
      for (size_t i = 0; i < kSweepChunk; ++i) inputs[i] = begin + static_cast<uint32_t>(i);
      visit(begin, inputs.data());
    }
  }
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count();
}

// The vector ISAs (beyond the scalar loop) to check on this CPU; prints
// which ones this CPU cannot run, so a skipped path is visible in the log.
inline std::vector<convert_detail::ConvertIsa> vector_isas_to_check() {
  std::vector<convert_detail::ConvertIsa> isas;
  for (auto isa : {convert_detail::ConvertIsa::kAvx2, convert_detail::ConvertIsa::kAvx512}) {
    if (convert_detail::convert_isa_available(isa)) {
      isas.push_back(isa);
    } else {
      std::printf("note: this CPU cannot run the %s kernels; they are not checked here\n",
                  convert_detail::convert_isa_name(isa));
    }
  }
  return isas;
}

// Prints how long a sweep took (informational; tests never assert on time).
inline void report_sweep_time(const char* what, double seconds) {
  std::printf("[ timing   ] %s: all 2^32 fp32 patterns in %.2f s on %d threads\n", what, seconds,
              omp_get_max_threads());
}

}  // namespace mixtrain::testing
