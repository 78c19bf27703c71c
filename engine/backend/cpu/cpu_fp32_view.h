// Why: CPU kernels are written once, for fp32 spans, whatever the storage
// types of the tensors they read and write. Fp32View hands out a tensor's
// elements as fp32: fp32 tensors in place (no copy), fp16 and bf16 ones
// converted by numerics/convert (vectorized) through a caller's buffer. So
// dtype dispatch happens once per span, never per element inside a loop.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/backend/tensor.h"
#include "engine/numerics/convert.h"

namespace mixtrain::cpu_ops {

class Fp32View {
 public:
  // `t` must be fp32, fp16 or bf16 (the op checks that beforehand).
  explicit Fp32View(const Tensor& t)
      : data_(static_cast<char*>(t.data())),
        dtype_(t.dtype()),
        element_size_(dtype_size(t.dtype())) {}

  // Elements [begin, begin + n) to read: the tensor's own memory when it is
  // fp32, else `buffer` (room for n floats) filled with the converted values.
  const float* read(int64_t begin, int64_t n, float* buffer) const {
    if (dtype_ == DType::kF32) return at(begin);
    convert(address(begin), dtype_, buffer, DType::kF32, static_cast<size_t>(n));
    return buffer;
  }

  // Elements [begin, begin + n) to overwrite: the tensor's own memory when
  // it is fp32, else `buffer`. commit() stores what was written.
  float* overwrite(int64_t begin, int64_t n, float* buffer) const {
    (void)n;
    return dtype_ == DType::kF32 ? at(begin) : buffer;
  }

  // Like overwrite(), but the span starts out holding the current values,
  // for read-modify-write (+=). commit() stores the result.
  float* update(int64_t begin, int64_t n, float* buffer) const {
    if (dtype_ == DType::kF32) return at(begin);
    convert(address(begin), dtype_, buffer, DType::kF32, static_cast<size_t>(n));
    return buffer;
  }

  // Stores a span obtained from overwrite() or update() into the tensor
  // (rounding to its dtype); nothing to do for fp32, written in place.
  void commit(int64_t begin, int64_t n, const float* span) const {
    if (dtype_ == DType::kF32) return;
    convert(span, DType::kF32, address(begin), dtype_, static_cast<size_t>(n));
  }

 private:
  float* at(int64_t begin) const { return reinterpret_cast<float*>(data_) + begin; }
  char* address(int64_t begin) const { return data_ + static_cast<size_t>(begin) * element_size_; }

  char* data_;
  DType dtype_;
  size_t element_size_;
};

}  // namespace mixtrain::cpu_ops
