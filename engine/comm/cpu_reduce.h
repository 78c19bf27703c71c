// Why: one hop of a ring reduction on the CPU, rounded the way NCCL's ring
// rounds: the two operands are widened to fp32, combined, and the result
// rounded once to the buffer's dtype (round to nearest even). fp32
// addition rounds fp16/bf16 sums exactly once, so every hop equals a
// correctly rounded 16-bit add, and a rank reproducing the ring's order
// reproduces its bits.
#pragma once

#include <cstdint>

#include "engine/comm/communicator.h"
#include "engine/numerics/dtype.h"

namespace mixtrain {

// dst[i] = op(a[i], b[i]) for i < n, for fp32, fp16 or bf16 buffers of
// `dtype`. dst may be a or b (same start), nothing else may overlap.
void reduce_elements(void* dst, const void* a, const void* b, int64_t n, DType dtype, ReduceOp op);

}  // namespace mixtrain
