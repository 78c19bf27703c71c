// Why: convert() pivots every pair through fp32, so each instruction set
// only needs eight single-threaded loops (four formats in, four out). This
// internal header names those loops and lets tests run each ISA's set.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/numerics/dtype.h"

namespace mixtrain::convert_detail {

// dst / src hold fp32 values; pointers need no alignment at all.
using ToF32Kernel = void (*)(const void* src, void* dst, size_t n);
using FromF32Kernel = void (*)(const void* src, void* dst, size_t n, bool saturate_fp8);

// One instruction set's loops. Each converts n elements, bit-identical to
// the scalar functions in float16.h / fp8.h.
struct ConvertKernels {
  ToF32Kernel f16_to_f32;
  ToF32Kernel bf16_to_f32;
  ToF32Kernel e4m3_to_f32;
  ToF32Kernel e5m2_to_f32;
  FromF32Kernel f32_to_f16;
  FromF32Kernel f32_to_bf16;
  FromF32Kernel f32_to_e4m3;
  FromF32Kernel f32_to_e5m2;
};

enum class ConvertIsa { kPortable, kAvx2, kAvx512 };

// "portable", "avx2", "avx512" (for test names and benchmark labels).
const char* convert_isa_name(ConvertIsa isa);

// True when this CPU can run `isa`'s kernels (kPortable always).
bool convert_isa_available(ConvertIsa isa);

// The widest available ISA: what convert() uses.
ConvertIsa best_convert_isa();

// Loop sets, one per ISA. Only call a set whose ISA is available.
const ConvertKernels& portable_kernels();
const ConvertKernels& avx2_kernels();
const ConvertKernels& avx512_kernels();

// convert() with a chosen ISA instead of the best one: same contract,
// same threading. Throws EngineError(kInvalidArgument) if `isa` is not
// available or a dtype is not a float format.
void convert_using(ConvertIsa isa, const void* src, DType src_type, void* dst, DType dst_type,
                   size_t n, bool saturate_fp8);

}  // namespace mixtrain::convert_detail
