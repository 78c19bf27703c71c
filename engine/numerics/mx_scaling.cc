// Why: MXFP8 block quantization (see mx_scaling.h), exact: the scale is a
// power of two found from amax's exponent bits, and V / X is V times the
// power of two 1/X, which fp32 multiplies exactly down to its normal range
// (below it the element would round to zero anyway).
#include "engine/numerics/mx_scaling.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

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

// fp32 magnitude bits of |x|: they order like |x|, and any NaN's exceed
// inf's (0x7f800000), so the max over a block says whether it holds one.
inline uint32_t magnitude_bits(float x) { return std::bit_cast<uint32_t>(x) & 0x7fffffffu; }

// The scale code of a block whose largest magnitude has fp32 bits
// `amax_bits` (NaN/inf: the NaN code), and the multiplier that divides by
// the scale (NaN for the NaN code, so every element becomes NaN).
struct BlockScale {
  uint8_t code;
  float multiplier;
};
inline BlockScale block_scale(uint32_t amax_bits, Fp8Format format) {
  if (amax_bits >= 0x7f800000u) return {kE8M0NaN, std::nanf("")};
  const uint8_t code = mx_scale_code(std::bit_cast<float>(amax_bits), format);
  return {code, reciprocal_of_scale(code)};
}

// *element = fp8(scaled), saturating; 1 when scaled (not NaN) lay beyond
// the format's max (fp32 bits max_bits), else 0.
inline int64_t store_scaled(float scaled, const fp8_detail::Encoding& encoding, uint32_t max_bits,
                            uint8_t* element) {
  const uint32_t magnitude = magnitude_bits(scaled);
  *element = fp8_detail::encode(scaled, encoding, /*saturate=*/true);
  return (magnitude > max_bits) & (magnitude <= 0x7f800000u);
}

const fp8_detail::Encoding& encoding_of(Fp8Format format) {
  return format == Fp8Format::kE4M3 ? fp8_detail::kE4M3 : fp8_detail::kE5M2;
}

// One row blocked along itself, block by block (the 32-element loops
// vectorize; one pass over the row with a multiplier per element's block
// measured half as fast).
template <class T>
MIXTRAIN_MULTIVERSION int64_t quantize_row(const T* src, int64_t cols, Fp8Format format,
                                           uint8_t* elements, uint8_t* scales) {
  const fp8_detail::Encoding& encoding = encoding_of(format);
  const uint32_t max_bits = std::bit_cast<uint32_t>(fp8_max(format));
  int64_t clamped = 0;
  for (int64_t first = 0, block = 0; first < cols; first += kMxBlockSize, ++block) {
    const int64_t count = std::min(kMxBlockSize, cols - first);
    const T* x = src + first;
    uint32_t amax_bits = 0;
    for (int64_t i = 0; i < count; ++i)
      amax_bits = std::max(amax_bits, magnitude_bits(to_float(x[i])));
    const BlockScale scale = block_scale(amax_bits, format);
    scales[block] = scale.code;
    for (int64_t i = 0; i < count; ++i)
      clamped +=
          store_scaled(to_float(x[i]) * scale.multiplier, encoding, max_bits, elements + first + i);
  }
  return clamped;
}

// One band of up to 32 rows blocked along columns: every column's block
// at once, reading the band row by row (contiguous) instead of down each
// column. `amax_bits` and `multipliers` are cols long, scratch.
template <class T>
MIXTRAIN_MULTIVERSION int64_t quantize_band(const T* src, int64_t rows, int64_t cols,
                                            Fp8Format format, uint8_t* elements, uint8_t* scales,
                                            uint32_t* amax_bits, float* multipliers) {
  const fp8_detail::Encoding& encoding = encoding_of(format);
  const uint32_t max_bits = std::bit_cast<uint32_t>(fp8_max(format));
  std::fill(amax_bits, amax_bits + cols, 0u);
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = src + r * cols;
    for (int64_t c = 0; c < cols; ++c)
      amax_bits[c] = std::max(amax_bits[c], magnitude_bits(to_float(x[c])));
  }
  for (int64_t c = 0; c < cols; ++c) {
    const BlockScale scale = block_scale(amax_bits[c], format);
    scales[c] = scale.code;
    multipliers[c] = scale.multiplier;
  }
  int64_t clamped = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = src + r * cols;
    uint8_t* out = elements + r * cols;
    for (int64_t c = 0; c < cols; ++c)
      clamped += store_scaled(to_float(x[c]) * multipliers[c], encoding, max_bits, out + c);
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
  const bool parallel = rows * cols >= (1 << 16);
  int64_t clamped = 0;
  if (axis == MxAxis::kAlongRows) {
#pragma omp parallel for reduction(+ : clamped) schedule(static) if (parallel)
    for (int64_t r = 0; r < rows; ++r) {
      clamped += quantize_row(src + r * cols, cols, format, elements + r * cols,
                              scales + r * g.blocks_per_line);
    }
    return clamped;
  }
  // Along columns: band b holds rows [32b, 32b + 32) and their scales
  // scales[b * cols + c] (scale_index's layout).
#pragma omp parallel reduction(+ : clamped) if (parallel)
  {
    std::vector<uint32_t> amax_bits(static_cast<size_t>(cols));
    std::vector<float> multipliers(static_cast<size_t>(cols));
#pragma omp for schedule(static)
    for (int64_t band = 0; band < g.blocks_per_line; ++band) {
      const int64_t first = band * kMxBlockSize;
      clamped += quantize_band(src + first * cols, std::min(kMxBlockSize, rows - first), cols,
                               format, elements + first * cols, scales + band * cols,
                               amax_bits.data(), multipliers.data());
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
