// Why: the counting of magnitude_histogram.h, on fp32 bit patterns (every
// stored format widens to fp32 exactly): the exponent field gives
// floor(log2 |x|), one more when any mantissa bit is set gives the ceiling.
#include "engine/numerics/magnitude_histogram.h"

#include <algorithm>
#include <bit>
#include <type_traits>
#include <vector>

namespace mixtrain {
namespace {

constexpr size_t kParallelThreshold = size_t{1} << 18;
constexpr size_t kChunk = size_t{1} << 16;

// fp32 bits of the smallest normal of T.
template <class T>
constexpr uint32_t smallest_normal_bits() {
  return std::is_same_v<T, Half> ? 0x38800000u : 0x00800000u;  // 2^-14, 2^-126
}

// Counts value(i) for i in [begin, end), subnormal below `smallest_normal`
// (fp32 bits).
template <class Value>
void count_range(const Value& value, size_t begin, size_t end, uint32_t smallest_normal,
                 MagnitudeHistogram& h) {
  uint32_t amax_bits = std::bit_cast<uint32_t>(h.amax);
  for (size_t i = begin; i < end; ++i) {
    const uint32_t magnitude = std::bit_cast<uint32_t>(value(i)) & 0x7fffffffu;
    if (magnitude == 0) {
      ++h.zeros;
    } else if (magnitude >= 0x7f800000u) {
      ++h.nonfinite;
    } else {
      ++h.buckets[static_cast<size_t>(magnitude_bucket(std::bit_cast<float>(magnitude)))];
      h.subnormals += magnitude < smallest_normal;
      amax_bits = std::max(amax_bits, magnitude);
    }
  }
  h.amax = std::bit_cast<float>(amax_bits);
}

// Counts value(i) for i in [0, n) into `histogram`, in parallel chunks for
// large n.
template <class Value>
void count_all(const Value& value, size_t n, uint32_t smallest_normal,
               MagnitudeHistogram& histogram) {
  const size_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<MagnitudeHistogram> parts(chunks);
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
  for (size_t c = 0; c < chunks; ++c) {
    const size_t begin = c * kChunk;
    count_range(value, begin, std::min(n, begin + kChunk), smallest_normal, parts[c]);
  }
  for (const MagnitudeHistogram& part : parts) histogram.add(part);
}

}  // namespace

int64_t MagnitudeHistogram::total() const {
  int64_t sum = zeros + nonfinite;
  for (int64_t count : buckets) sum += count;
  return sum;
}

void MagnitudeHistogram::add(const MagnitudeHistogram& other) {
  for (size_t i = 0; i < buckets.size(); ++i) buckets[i] += other.buckets[i];
  zeros += other.zeros;
  subnormals += other.subnormals;
  nonfinite += other.nonfinite;
  amax = std::max(amax, other.amax);
}

int magnitude_bucket(float magnitude) {
  const uint32_t bits = std::bit_cast<uint32_t>(magnitude) & 0x7fffffffu;
  const int field = static_cast<int>(bits >> 23);
  // An fp32 subnormal lies far below the first bucket.
  if (field == 0) return 0;
  const int ceiling = field - 127 + ((bits & 0x7fffffu) != 0 ? 1 : 0);
  return std::clamp(ceiling, MagnitudeHistogram::kMinLog2, MagnitudeHistogram::kMaxLog2) -
         MagnitudeHistogram::kMinLog2;
}

template <class T>
void add_to_histogram(const T* x, size_t n, MagnitudeHistogram& histogram) {
  count_all([x](size_t i) { return to_float(x[i]); }, n, smallest_normal_bits<T>(), histogram);
}

void add_fp8_to_histogram(const uint8_t* codes, size_t n, Fp8Format format,
                          MagnitudeHistogram& histogram) {
  const uint32_t smallest_normal = format == Fp8Format::kE4M3 ? fp8_detail::kE4M3.min_normal_bits
                                                              : fp8_detail::kE5M2.min_normal_bits;
  count_all([codes, format](size_t i) { return fp8_to_float(codes[i], format); }, n,
            smallest_normal, histogram);
}

template void add_to_histogram(const float*, size_t, MagnitudeHistogram&);
template void add_to_histogram(const Half*, size_t, MagnitudeHistogram&);
template void add_to_histogram(const BFloat16*, size_t, MagnitudeHistogram&);

}  // namespace mixtrain
