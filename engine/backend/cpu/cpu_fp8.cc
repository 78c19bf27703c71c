// Why: the CPU backend's fp8 quantization ops, thin over the exact
// conversions of numerics/ (fp8_scaling.h per tensor, mx_scaling.h per
// block), so every other backend is compared against the definitions.
#include <algorithm>
#include <bit>
#include <cstdint>

#include "engine/backend/cpu/cpu_backend.h"

namespace mixtrain {

float CpuBackend::do_amax(const Tensor& src) {
  return dispatch_float(src.dtype(), "amax", [&](auto tag) {
    using T = decltype(tag);
    return mixtrain::amax(src.data_as<T>(), static_cast<size_t>(src.numel()));
  });
}

void CpuBackend::do_quantize_fp8_into(const Tensor& codes, const Tensor& src, float scale,
                                      const Tensor& stats, int64_t slot) {
  constexpr const char* kOp = "quantize_fp8";
  const Fp8QuantizeStats found = dispatch_float(src.dtype(), kOp, [&](auto tag) {
    using T = decltype(tag);
    return mixtrain::quantize_fp8(src.data_as<T>(), static_cast<size_t>(src.numel()), scale,
                                  fp8_format(codes.dtype()), static_cast<uint8_t*>(codes.data()));
  });
  // The slot's words: amax bits (a max: they order like |x|), pad, count.
  auto* words = static_cast<uint32_t*>(stats.data()) + kFp8StatsWords * slot;
  words[0] = std::max(words[0], std::bit_cast<uint32_t>(found.amax));
  const uint64_t count =
      (words[2] | (uint64_t{words[3]} << 32)) + static_cast<uint64_t>(found.saturated);
  words[2] = static_cast<uint32_t>(count);
  words[3] = static_cast<uint32_t>(count >> 32);
}

int64_t CpuBackend::do_mx_quantize(const Tensor& codes, const Tensor& block_scales,
                                   const Tensor& src, MxAxis axis) {
  constexpr const char* kOp = "mx_quantize";
  return dispatch_float(src.dtype(), kOp, [&](auto tag) {
    using T = decltype(tag);
    return mixtrain::mx_quantize(src.data_as<T>(), codes.dim(0), codes.dim(1), axis,
                                 fp8_format(codes.dtype()), static_cast<uint8_t*>(codes.data()),
                                 static_cast<uint8_t*>(block_scales.data()));
  });
}

void CpuBackend::do_dequantize_fp8(const Tensor& dst, const Fp8Operand& src) {
  constexpr const char* kOp = "dequantize_fp8";
  const Fp8Format format = fp8_format(src.codes.dtype());
  const uint8_t* codes = static_cast<const uint8_t*>(src.codes.data());
  dispatch_float(dst.dtype(), kOp, [&](auto tag) {
    using T = decltype(tag);
    T* out = dst.data_as<T>();
    if (src.block_scales.defined()) {
      mixtrain::mx_dequantize(codes, static_cast<const uint8_t*>(src.block_scales.data()),
                              src.codes.dim(0), src.codes.dim(1), src.block_axis, format, out);
      return;
    }
    const float inverse = 1.0f / src.scale;
    const int64_t n = dst.numel();
#pragma omp parallel for schedule(static) if (n >= (1 << 16))
    for (int64_t i = 0; i < n; ++i)
      out[i] = from_float<T>(fp8_to_float(codes[i], format) * inverse);
  });
}

}  // namespace mixtrain
