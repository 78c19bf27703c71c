// Why: MXFP8 block quantization (see mx_scaling.h), exact: the scale is a
// power of two found from amax's exponent bits, and V / X is V times the
// power of two 1/X, which fp32 multiplies exactly down to its normal range
// (below it the element would round to zero anyway).
#include "engine/numerics/mx_scaling.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "engine/common/cpu_features.h"

namespace mixtrain {
namespace {

constexpr int kE8M0Bias = 127;

// 2^-(code - 127), the multiplier that divides by X; code is not NaN.
inline float reciprocal_of_scale(uint8_t code) {
  return e8m0_to_float(static_cast<uint8_t>(2 * kE8M0Bias - code));
}

// A view of the blocks: block b of line l starts at element
// l * line_step + b * kMxBlockSize * element_step.
struct BlockGeometry {
  int64_t lines;         // rows (along rows) or cols (along columns)
  int64_t line_length;   // cols or rows
  int64_t line_step;     // distance between the first elements of two lines
  int64_t element_step;  // distance between consecutive elements of a block
  int64_t blocks_per_line;

  BlockGeometry(int64_t rows, int64_t cols, MxAxis axis) {
    bool along_rows = axis == MxAxis::kAlongRows;
    lines = along_rows ? rows : cols;
    line_length = along_rows ? cols : rows;
    line_step = along_rows ? cols : 1;
    element_step = along_rows ? 1 : cols;
    blocks_per_line = (line_length + kMxBlockSize - 1) / kMxBlockSize;
  }
  // Where block b of line l keeps its scale (the layout of MxAxis).
  int64_t scale_index(int64_t line, int64_t block, MxAxis axis) const {
    return axis == MxAxis::kAlongRows ? line * blocks_per_line + block : block * lines + line;
  }
};

template <class T>
MIXTRAIN_MULTIVERSION int64_t quantize_block(const T* src, int64_t count, int64_t step,
                                             Fp8Format format, uint8_t* elements, uint8_t* scale) {
  float values[kMxBlockSize];
  float block_amax = 0.0f;
  bool has_nan = false;
  for (int64_t i = 0; i < count; ++i) {
    values[i] = to_float(src[i * step]);
    has_nan |= std::isnan(values[i]);
    block_amax = std::max(block_amax, std::fabs(values[i]));
  }
  uint8_t code = has_nan ? kE8M0NaN : mx_scale_code(block_amax, format);
  *scale = code;
  if (code == kE8M0NaN) {
    const uint8_t nan_code = float_to_fp8(std::nanf(""), format);
    for (int64_t i = 0; i < count; ++i) elements[i * step] = nan_code;
    return 0;
  }
  const float multiplier = reciprocal_of_scale(code);
  const float max_value = fp8_max(format);
  int64_t clamped = 0;
  for (int64_t i = 0; i < count; ++i) {
    float scaled = values[i] * multiplier;
    clamped += std::fabs(scaled) > max_value;
    elements[i * step] = float_to_fp8(scaled, format, /*saturate=*/true);
  }
  return clamped;
}

}  // namespace

uint8_t mx_scale_code(float block_amax, Fp8Format format) {
  float magnitude = std::fabs(block_amax);
  if (!std::isfinite(magnitude)) return kE8M0NaN;
  // floor(log2(amax)) is the unbiased exponent; ilogb also reads
  // subnormals right, and any amax below 2^-119 clamps to 2^-127 anyway.
  int exponent = magnitude == 0.0f ? -kE8M0Bias : std::ilogb(magnitude) - fp8_emax(format);
  exponent = std::clamp(exponent, -kE8M0Bias, kE8M0Bias);
  return static_cast<uint8_t>(exponent + kE8M0Bias);
}

float e8m0_to_float(uint8_t code) {
  if (code == kE8M0NaN) return std::nanf("");
  // 2^-127 is the fp32 subnormal with only mantissa bit 22 set.
  return code == 0 ? std::bit_cast<float>(0x00400000u)
                   : std::bit_cast<float>(static_cast<uint32_t>(code) << 23);
}

int64_t mx_scale_count(int64_t rows, int64_t cols, MxAxis axis) {
  BlockGeometry geometry(rows, cols, axis);
  return geometry.lines * geometry.blocks_per_line;
}

template <class T>
int64_t mx_quantize(const T* src, int64_t rows, int64_t cols, MxAxis axis, Fp8Format format,
                    uint8_t* elements, uint8_t* scales) {
  const BlockGeometry g(rows, cols, axis);
  int64_t clamped = 0;
#pragma omp parallel for reduction(+ : clamped) schedule(static) if (rows * cols >= (1 << 16))
  for (int64_t line = 0; line < g.lines; ++line) {
    for (int64_t block = 0; block < g.blocks_per_line; ++block) {
      int64_t first = line * g.line_step + block * kMxBlockSize * g.element_step;
      int64_t count = std::min(kMxBlockSize, g.line_length - block * kMxBlockSize);
      clamped += quantize_block(src + first, count, g.element_step, format, elements + first,
                                scales + g.scale_index(line, block, axis));
    }
  }
  return clamped;
}

template <class T>
void mx_dequantize(const uint8_t* elements, const uint8_t* scales, int64_t rows, int64_t cols,
                   MxAxis axis, Fp8Format format, T* dst) {
  const BlockGeometry g(rows, cols, axis);
#pragma omp parallel for schedule(static) if (rows * cols >= (1 << 16))
  for (int64_t line = 0; line < g.lines; ++line) {
    for (int64_t block = 0; block < g.blocks_per_line; ++block) {
      int64_t first = line * g.line_step + block * kMxBlockSize * g.element_step;
      int64_t count = std::min(kMxBlockSize, g.line_length - block * kMxBlockSize);
      uint8_t code = scales[g.scale_index(line, block, axis)];
      for (int64_t i = 0; i < count; ++i) {
        int64_t at = first + i * g.element_step;
        dst[at] = from_float<T>(mx_dequantize_value(code, elements[at], format));
      }
    }
  }
}

#define MIXTRAIN_INSTANTIATE_MX(T)                                                                 \
  template int64_t mx_quantize(const T*, int64_t, int64_t, MxAxis, Fp8Format, uint8_t*, uint8_t*); \
  template void mx_dequantize(const uint8_t*, const uint8_t*, int64_t, int64_t, MxAxis, Fp8Format, \
                              T*);
MIXTRAIN_INSTANTIATE_MX(float)
MIXTRAIN_INSTANTIATE_MX(Half)
MIXTRAIN_INSTANTIATE_MX(BFloat16)
#undef MIXTRAIN_INSTANTIATE_MX

}  // namespace mixtrain
