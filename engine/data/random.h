// Why: data order must be identical on every machine and standard library,
// so the engine maps mt19937_64 output (whose sequence the C++ standard
// fixes) to ranges itself instead of using std::uniform_int_distribution,
// whose algorithm is implementation-defined.
#pragma once

#include <cstdint>
#include <random>

namespace mixtrain {

// SplitMix64 finalizer: a bijective 64-bit mix, used to turn (seed, counter)
// pairs into well-spread RNG seeds.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform integer in [0, bound) by rejection sampling (no modulo bias).
// Requires bound > 0. Consumes one or more outputs of `rng`.
inline uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound) {
  // Accept x only from [threshold, 2^64), whose size is a multiple of bound.
  const uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const uint64_t x = rng();
    if (x >= threshold) return x % bound;
  }
}

}  // namespace mixtrain
