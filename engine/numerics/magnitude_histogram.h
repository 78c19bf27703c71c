// Why: where a tensor's values lie against the range of the format they
// are stored in is the picture mixed precision is about (Micikevicius et
// al., 2018, Figure 3: fp16 gradients below the smallest subnormal are
// lost unless the loss scale shifts them up). This counts, per power of
// two, how many elements have each magnitude, plus the zeros, the
// subnormals of the storage format and the non-finite ones, so that the
// trainer can export the histogram and the ratios derived from it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "engine/numerics/float16.h"
#include "engine/numerics/fp8.h"

namespace mixtrain {

struct MagnitudeHistogram {
  // Bucket i counts the nonzero finite |x| with ceil(log2 |x|) == kMinLog2
  // + i, i.e. 2^(b-1) < |x| <= 2^b for b = kMinLog2 + i; magnitudes below
  // the first bucket land in it, above the last in the last.
  static constexpr int kMinLog2 = -40;
  static constexpr int kMaxLog2 = 20;
  static constexpr int kBuckets = kMaxLog2 - kMinLog2 + 1;

  std::array<int64_t, kBuckets> buckets{};
  int64_t zeros = 0;
  int64_t subnormals = 0;  // nonzero, below the storage format's smallest normal
  int64_t nonfinite = 0;   // inf and NaN (in no bucket)
  float amax = 0.0f;       // the largest finite |x|

  // Every element counted: the buckets, the zeros and the non-finite.
  int64_t total() const;
  // Adds another histogram's counts (amax: the larger).
  void add(const MagnitudeHistogram& other);

  bool operator==(const MagnitudeHistogram&) const = default;
};

// The bucket of a nonzero finite fp32 magnitude (see MagnitudeHistogram).
int magnitude_bucket(float magnitude);

// Counts n elements of T (float, Half or BFloat16) into `histogram`, with
// subnormals judged by T's smallest normal (2^-14 for fp16, 2^-126
// otherwise). Multi-threaded (OpenMP) for large n.
template <class T>
void add_to_histogram(const T* x, size_t n, MagnitudeHistogram& histogram);

// Counts n fp8 codes of `format` by their values, subnormals judged by the
// format's smallest normal (2^-6 for E4M3, 2^-14 for E5M2).
void add_fp8_to_histogram(const uint8_t* codes, size_t n, Fp8Format format,
                          MagnitudeHistogram& histogram);

}  // namespace mixtrain
