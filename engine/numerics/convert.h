// Why: bulk conversion between the engine's float formats, vectorized with
// runtime dispatch (AVX-512 / F16C paths where the CPU has them, portable
// loops elsewhere). Results are bit-identical to the scalar conversions in
// float16.h and fp8.h whichever path runs.
#pragma once

#include <cstddef>

#include "engine/numerics/dtype.h"

namespace mixtrain {

struct ConvertOptions {
  // fp8 targets: out-of-range values and infinities become +-max finite
  // (CUDA __NV_SATFINITE) when true; when false they become NaN (E4M3) or
  // +-inf (E5M2) as CUDA __NV_NOSAT does.
  bool saturate_fp8 = true;
};

// Converts n elements of src (src_type) to dst (dst_type). Any pair of
// fp32, fp16, bf16, fp8_e4m3, fp8_e5m2 (same type copies the bytes). src
// and dst must not overlap unless they are the same pointer with the same
// element size (fp16 <-> bf16 in place works). Neither pointer needs any
// alignment. Multi-threaded (OpenMP) above a size threshold when called
// outside a parallel region. Throws EngineError(kInvalidArgument) for int32
// and e8m0.
void convert(const void* src, DType src_type, void* dst, DType dst_type, size_t n,
             ConvertOptions options = {});

}  // namespace mixtrain
