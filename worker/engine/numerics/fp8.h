// Why: the two OCP fp8 formats, scalar and exact. Rounding is to nearest
// even with subnormals kept, matching CUDA's __nv_cvt_float_to_fp8:
//  E4M3 (bias 7): max 448 (S.1111.110), no infinities, NaN = S.1111.111.
//  E5M2 (bias 15): max 57344, +-inf = S.11111.00, NaNs S.11111.{01,10,11}.
// Saturating mode (default) sends out-of-range values and +-inf to +-max;
// non-saturating sends them to NaN (E4M3) or +-inf (E5M2). NaN stays NaN
// (E4M3: S.1111.111; E5M2: S.11111.1x keeping the sign). Tiny values keep
// their sign (-0). fp8 -> fp32 is exact.
#pragma once

#include <cstdint>

namespace mixtrain {

enum class Fp8Format { kE4M3, kE5M2 };

inline constexpr float kFp8E4M3Max = 448.0f;
inline constexpr float kFp8E5M2Max = 57344.0f;

uint8_t float_to_fp8(float x, Fp8Format format, bool saturate = true);
float fp8_to_float(uint8_t code, Fp8Format format);

}  // namespace mixtrain
