// Why: the comm tests, in the test processes and in the rank processes,
// build CPU tensors from float values and read them back, and compute the
// expected ring results with their own chunk arithmetic (not ring.h's, so
// the library is checked against an independent statement of the ring).
#pragma once

#include <bit>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/comm/communicator.h"
#include "engine/numerics/convert.h"

namespace mixtrain::comm_test {

inline Backend& cpu() {
  static const std::unique_ptr<Backend> backend = make_backend("cpu");
  return *backend;
}

// Default options but for the timeout (and a memory tracker).
inline CommOptions options_with(std::chrono::milliseconds timeout,
                                std::shared_ptr<MemoryTracker> memory = nullptr) {
  CommOptions options;
  options.timeout = timeout;
  options.memory = std::move(memory);
  return options;
}

// A CPU tensor of `dtype` holding `values` (rounded to dtype).
inline Tensor make_tensor(DType dtype, const std::vector<float>& values) {
  Tensor t =
      cpu().empty({static_cast<int64_t>(values.size())}, dtype, MemoryCategory::kCommBuffers);
  convert(values.data(), DType::kF32, t.data(), dtype, values.size());
  return t;
}

// t's elements as floats (exact for fp32, fp16 and bf16).
inline std::vector<float> read_floats(const Tensor& t) {
  std::vector<float> values(t.numel());
  convert(t.data(), t.dtype(), values.data(), DType::kF32, values.size());
  return values;
}

// x rounded to dtype and widened back.
inline float round_to(DType dtype, float x) {
  uint32_t stored = 0;
  float back = 0;
  convert(&x, DType::kF32, &stored, dtype, 1);
  convert(&stored, dtype, &back, DType::kF32, 1);
  return back;
}

inline bool same_bits(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

// Elements of ring chunk c when n elements are cut into `world` chunks,
// the first n % world one element longer.
inline int64_t chunk_size(int64_t n, int world, int c) {
  return n / world + (c % world < n % world ? 1 : 0);
}

// The chunk holding element i.
inline int chunk_of(int64_t i, int64_t n, int world) {
  int c = 0;
  for (int64_t end = chunk_size(n, world, 0); i >= end; end += chunk_size(n, world, ++c)) {
  }
  return c;
}

// The ring's sum of element i over ranks' inputs x[rank][i]: chunk c's sum
// starts at rank c+1 and adds ranks c+2, ..., c, rounding to dtype after
// every addition.
inline float ring_sum(const std::vector<std::vector<float>>& x, int64_t i, DType dtype) {
  const int world = static_cast<int>(x.size());
  const int c = chunk_of(i, static_cast<int64_t>(x[0].size()), world);
  float sum = x[(c + 1) % world][i];
  for (int k = 2; k <= world; ++k) sum = round_to(dtype, sum + x[(c + k) % world][i]);
  return sum;
}

}  // namespace mixtrain::comm_test
