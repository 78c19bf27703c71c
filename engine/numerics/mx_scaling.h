// Why: block scaling for fp8 as the OCP Microscaling (MX) specification
// v1.0 defines MXFP8: every block of 32 consecutive elements shares one
// scale X = 2^e stored as E8M0 (an exponent with bias 127, e in
// [-127, 127], code 0xFF = NaN, no zero or infinity), and each element
// is stored as an fp8 P with the value X * P. Quantizing a block (§6.3):
// e = floor(log2(amax of the block)) - emax of the element format (8 for
// E4M3, 15 for E5M2), clamped to [-127, 127] (an all-zero block gets
// 2^-127); P = V / X rounded to nearest even, clamped to the largest
// normal. A block whose amax is NaN or infinite gets the NaN scale, and a
// NaN scale makes every element of its block NaN. Blocks run along one
// axis of a row-major (rows, cols) matrix: the GEMM's reduction dimension,
// which is the rows for one operand and the columns for the other.
#pragma once

#include <cstdint>

#include "engine/numerics/fp8.h"

namespace mixtrain {

inline constexpr int64_t kMxBlockSize = 32;
inline constexpr uint8_t kE8M0NaN = 0xFF;

// The exponent of a format's largest power of two: 8 (E4M3), 15 (E5M2).
inline int fp8_emax(Fp8Format format) { return format == Fp8Format::kE4M3 ? 8 : 15; }

// The E8M0 code of the shared scale of a block whose largest |V| is
// block_amax (see the top of this file).
uint8_t mx_scale_code(float block_amax, Fp8Format format);

// The value of an E8M0 code: 2^(code - 127) (2^-127 is an fp32 subnormal,
// exact), NaN for 0xFF.
float e8m0_to_float(uint8_t code);

// X * P as fp32 (rounded once: +-inf beyond fp32's range), NaN when the
// scale is NaN.
inline float mx_dequantize_value(uint8_t scale_code, uint8_t element, Fp8Format format) {
  return fp8_to_float(element, format) * e8m0_to_float(scale_code);
}

// Which way the blocks run through a row-major (rows, cols) matrix.
enum class MxAxis {
  kAlongRows,     // 32 consecutive columns of one row; scales (rows, ceil(cols / 32))
  kAlongColumns,  // 32 consecutive rows of one column; scales (ceil(rows / 32), cols)
};

// The number of scales of a (rows, cols) matrix blocked along `axis` (the
// last block of a line may be shorter than 32).
int64_t mx_scale_count(int64_t rows, int64_t cols, MxAxis axis);

// Quantizes src (rows, cols; T float, Half or BFloat16) into elements
// (same shape) and scales (laid out as described at MxAxis). Returns the
// number of finite elements whose V / X exceeded the element format's max
// and were clamped. Multi-threaded (OpenMP) over lines of blocks.
template <class T>
int64_t mx_quantize(const T* src, int64_t rows, int64_t cols, MxAxis axis, Fp8Format format,
                    uint8_t* elements, uint8_t* scales);

// The inverse: dst (rows, cols; T float, Half or BFloat16) = X * P, each
// rounded to T once.
template <class T>
void mx_dequantize(const uint8_t* elements, const uint8_t* scales, int64_t rows, int64_t cols,
                   MxAxis axis, Fp8Format format, T* dst);

}  // namespace mixtrain
