// Why: CpuGemm validates Tensors once and then hands the same plain
// description of the product to whichever kernel runs it (oneDNN or the
// portable one), so the kernels see raw pointers and never re-check shapes.
#pragma once

#include <cstdint>

#include "engine/numerics/dtype.h"

namespace mixtrain {

// C = alpha * op(A) op(B) + beta * C + bias (bias on every row), per batch
// index, all operands dense row-major: op(A) (m,k), op(B) (k,n), C (m,n).
// A stored (m,k), or (k,m) when trans_a; B stored (k,n), or (n,k) when
// trans_b. beta == 0 means C is not read.
struct GemmSpec {
  int64_t batch = 1;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  bool batched = false;  // the tensors are 3-D (batch, ., .)
  bool trans_a = false;
  bool trans_b = false;
  DType ab_type = DType::kF32;  // A and B
  DType c_type = DType::kF32;
  bool has_bias = false;
  DType bias_type = DType::kF32;  // bias (n), when has_bias
  float alpha = 1.0f;
  float beta = 0.0f;
};

// The data of one GemmSpec. bias is null unless spec.has_bias.
struct GemmOperands {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  const void* bias = nullptr;
};

}  // namespace mixtrain
