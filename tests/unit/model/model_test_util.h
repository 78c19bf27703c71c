// Why: the model tests share how they build a CPU backend, the tiny model
// configurations, random ids, and fp32 parameter/gradient tensors made from
// and read back as host vectors.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/gpt.h"
#include "engine/numerics/float16.h"

namespace mixtrain::model_test {

// L=2, NH=2, C=8, T=4, V=11: small enough for finite differences of every
// parameter, with every layer kind present.
inline GptConfig tiny_config() { return GptConfig{2, 2, 8, 4, 11}; }

// The example configuration of the job spec (about 10.8M parameters).
inline GptConfig example_config() { return GptConfig{6, 6, 384, 256, 256}; }

// A (batch, seq) int32 tensor of ids drawn uniformly from [0, vocab).
inline Tensor random_ids(Backend& backend, int64_t batch, int64_t seq, int64_t vocab,
                         uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(batch * seq));
  for (int32_t& id : ids) id = dist(rng);
  Tensor t = backend.empty({batch, seq}, DType::kI32, MemoryCategory::kActivations);
  backend.copy_from_host(t, ids.data());
  return t;
}

// A flat tensor of `dtype` holding `values` rounded to it.
inline Tensor make_flat(Backend& backend, const std::vector<float>& values, DType dtype,
                        MemoryCategory category) {
  const int64_t n = static_cast<int64_t>(values.size());
  Tensor fp32 = backend.empty({n}, DType::kF32, category);
  backend.copy_from_host(fp32, values.data());
  if (dtype == DType::kF32) return fp32;
  Tensor t = backend.empty({n}, dtype, category);
  backend.cast(t, fp32);
  return t;
}

// A zero-filled flat gradient tensor of `n` elements.
inline Tensor make_grads(Backend& backend, int64_t n, DType dtype) {
  return backend.zeros({n}, dtype, MemoryCategory::kGrads);
}

// The values of a float tensor of any compute dtype as fp32.
inline std::vector<float> to_host(Backend& backend, const Tensor& t) {
  Tensor fp32 = backend.empty(t.shape(), DType::kF32, MemoryCategory::kWorkspace);
  backend.cast(fp32, t);
  std::vector<float> values(static_cast<size_t>(t.numel()));
  backend.copy_to_host(values.data(), fp32);
  return values;
}

}  // namespace mixtrain::model_test
