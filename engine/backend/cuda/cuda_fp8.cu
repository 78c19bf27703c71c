// Why: the fp8 quantization ops on the GPU (backend.h's fp8 section), the
// same arithmetic as numerics/fp8_scaling.h and mx_scaling.h: the scaled
// product rounded to fp32 once, then CUDA's saturating fp8 conversion
// (bit-identical to the CPU's), E8M0 scales from amax's exponent bits.
// amax and the counts are integer atomics (order-independent, so
// deterministic); the ops that return them to the host synchronize.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/cuda_dtype.cuh"
#include "engine/backend/cuda/cuda_error.h"
#include "engine/backend/cuda/cuda_kernel_utils.cuh"
#include "engine/backend/op_checks.h"

namespace mixtrain {
namespace {

constexpr int kE8M0Bias = 127;

// The statistics a quantizing kernel gathers on the device (also the
// layout of a Backend::fp8_stats_tensor slot).
struct DeviceStats {
  unsigned int amax_bits;  // |x| bits, NaN masked to 0: they order like |x|
  unsigned int pad;
  unsigned long long count;  // saturated or clamped elements
};
static_assert(sizeof(DeviceStats) == kFp8StatsWords * 4,
              "DeviceStats is one Backend::fp8_stats_tensor slot");

__device__ inline unsigned int magnitude_bits_without_nan(float x) {
  const unsigned int magnitude = __float_as_uint(x) & 0x7fffffffu;
  return magnitude <= 0x7f800000u ? magnitude : 0u;
}

template <class Ref>
__global__ void amax_kernel(Ref src, int64_t n, DeviceStats* stats) {
  unsigned int result = 0;
  for (int64_t i = gpu::thread_index(); i < n; i += gpu::grid_size()) {
    result = max(result, magnitude_bits_without_nan(src.load(i)));
  }
  atomicMax(&stats->amax_bits, result);
}

template <class Fp8, class Ref>
__global__ void quantize_kernel(Fp8* codes, Ref src, float scale, float max_value, int64_t n,
                                DeviceStats* stats) {
  unsigned int result = 0;
  unsigned long long saturated = 0;
  for (int64_t i = gpu::thread_index(); i < n; i += gpu::grid_size()) {
    const float x = src.load(i);
    const float scaled = x * scale;
    result = max(result, magnitude_bits_without_nan(x));
    saturated += fabsf(scaled) > max_value;  // false for NaN
    codes[i] = gpu::from_f32<Fp8>(scaled);
  }
  atomicMax(&stats->amax_bits, result);
  if (saturated != 0) atomicAdd(&stats->count, saturated);
}

// Where block b of line l starts, its step, and where its scale lives.
struct BlockGeometry {
  int64_t rows, cols, blocks_per_line;
  bool along_rows;
  __host__ __device__ int64_t lines() const { return along_rows ? rows : cols; }
  __host__ __device__ int64_t line_length() const { return along_rows ? cols : rows; }
  __device__ int64_t first(int64_t line, int64_t block) const {
    return along_rows ? line * cols + block * kMxBlockSize : block * kMxBlockSize * cols + line;
  }
  __device__ int64_t step() const { return along_rows ? 1 : cols; }
  __device__ int64_t scale_index(int64_t line, int64_t block) const {
    return along_rows ? line * blocks_per_line + block : block * lines() + line;
  }
  // The scale index of element (r, c).
  __device__ int64_t scale_of(int64_t r, int64_t c) const {
    return along_rows ? scale_index(r, c / kMxBlockSize) : scale_index(c, r / kMxBlockSize);
  }
};

BlockGeometry geometry(int64_t rows, int64_t cols, MxAxis axis) {
  const bool along_rows = axis == MxAxis::kAlongRows;
  const int64_t length = along_rows ? cols : rows;
  return {rows, cols, (length + kMxBlockSize - 1) / kMxBlockSize, along_rows};
}

// 2^(code - 127) for a code that is not NaN (code 0 is the subnormal 2^-127).
__device__ inline float e8m0_value(unsigned int code) {
  return code == 0 ? __uint_as_float(0x00400000u) : __uint_as_float(code << 23);
}

// One thread per block of 32: the spec's shared exponent from the block's
// amax, then the elements.
template <class Fp8, class Ref>
__global__ void mx_quantize_kernel(Fp8* codes, uint8_t* scales, Ref src, BlockGeometry g, int emax,
                                   float max_value, DeviceStats* stats) {
  const int64_t blocks = g.lines() * g.blocks_per_line;
  unsigned long long clamped = 0;
  for (int64_t k = gpu::thread_index(); k < blocks; k += gpu::grid_size()) {
    const int64_t line = k / g.blocks_per_line;
    const int64_t block = k % g.blocks_per_line;
    const int64_t first = g.first(line, block);
    const int64_t count = min(kMxBlockSize, g.line_length() - block * kMxBlockSize);
    unsigned int amax_bits = 0;
    bool has_nan = false;
    for (int64_t i = 0; i < count; ++i) {
      const unsigned int magnitude = __float_as_uint(src.load(first + i * g.step())) & 0x7fffffffu;
      has_nan = has_nan || magnitude > 0x7f800000u;
      amax_bits = max(amax_bits, magnitude);
    }
    unsigned int code;
    if (has_nan || amax_bits >= 0x7f800000u) {
      code = kE8M0NaN;
    } else {
      // floor(log2(amax)) from the exponent field; a subnormal or zero amax
      // reads as below -126, which the clamp sends to 2^-127 as the spec's.
      const int exponent =
          amax_bits == 0 ? -kE8M0Bias : static_cast<int>(amax_bits >> 23) - kE8M0Bias - emax;
      code = static_cast<unsigned int>(min(max(exponent, -kE8M0Bias), kE8M0Bias) + kE8M0Bias);
    }
    scales[g.scale_index(line, block)] = static_cast<uint8_t>(code);
    const float multiplier =
        code == kE8M0NaN ? __uint_as_float(0x7fc00000u) : e8m0_value(2 * kE8M0Bias - code);
    for (int64_t i = 0; i < count; ++i) {
      const float scaled = src.load(first + i * g.step()) * multiplier;
      clamped += fabsf(scaled) > max_value;
      codes[first + i * g.step()] = gpu::from_f32<Fp8>(scaled);
    }
  }
  if (clamped != 0) atomicAdd(&stats->count, clamped);
}

template <class Fp8, class Ref>
__global__ void dequantize_kernel(Ref dst, const Fp8* codes, float inverse, int64_t n) {
  for (int64_t i = gpu::thread_index(); i < n; i += gpu::grid_size()) {
    dst.store(i, gpu::to_f32(codes[i]) * inverse);
  }
}

template <class Fp8, class Ref>
__global__ void mx_dequantize_kernel(Ref dst, const Fp8* codes, const uint8_t* scales,
                                     BlockGeometry g) {
  const int64_t n = g.rows * g.cols;
  for (int64_t i = gpu::thread_index(); i < n; i += gpu::grid_size()) {
    const unsigned int code = scales[g.scale_of(i / g.cols, i % g.cols)];
    const float x =
        code == kE8M0NaN ? __uint_as_float(0x7fc00000u) : gpu::to_f32(codes[i]) * e8m0_value(code);
    dst.store(i, x);
  }
}

// Zeroes the device statistics, runs `launch(stats)`, and reads them back.
template <class Launch>
DeviceStats with_device_stats(CudaBackend& backend, cudaStream_t stream, Launch&& launch) {
  const Tensor buffer = backend.scratch({ScratchRequest::raw_bytes(sizeof(DeviceStats))})[0];
  auto* stats = static_cast<DeviceStats*>(buffer.data());
  MIXTRAIN_CUDA_CHECK(cudaMemsetAsync(stats, 0, sizeof(DeviceStats), stream));
  launch(stats);
  DeviceStats host{};
  MIXTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(&host, stats, sizeof(DeviceStats), cudaMemcpyDeviceToHost, stream));
  MIXTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

float bits_to_float(unsigned int bits) {
  float value;
  static_assert(sizeof value == sizeof bits);
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

}  // namespace

float CudaBackend::do_amax(const Tensor& src) {
  const cudaStream_t stream = begin_op();
  if (src.numel() == 0) return 0.0f;
  const DeviceStats stats = with_device_stats(*this, stream, [&](DeviceStats* device) {
    gpu::dispatch_compute({&src}, "amax", [&](auto policy) {
      using P = decltype(policy);
      amax_kernel<<<gpu::grid_blocks(src.numel()), gpu::kBlockThreads, 0, stream>>>(
          P::ref(src), src.numel(), device);
      MIXTRAIN_CUDA_CHECK_LAUNCH("amax_kernel");
    });
  });
  return bits_to_float(stats.amax_bits);
}

void CudaBackend::do_quantize_fp8_into(const Tensor& codes, const Tensor& src, float scale,
                                       const Tensor& stats, int64_t slot) {
  constexpr const char* kOp = "quantize_fp8";
  const cudaStream_t stream = begin_op();
  if (src.numel() == 0) return;
  // The slot's layout (fp8_stats.cc) is DeviceStats'.
  auto* device =
      reinterpret_cast<DeviceStats*>(static_cast<uint32_t*>(stats.data()) + kFp8StatsWords * slot);
  const float max_value = fp8_max(fp8_format(codes.dtype()));
  gpu::dispatch_fp8(codes.dtype(), [&](auto fp8_tag) {
    using Fp8 = decltype(fp8_tag);
    gpu::dispatch_compute({&src}, kOp, [&](auto policy) {
      using P = decltype(policy);
      quantize_kernel<<<gpu::grid_blocks(src.numel()), gpu::kBlockThreads, 0, stream>>>(
          static_cast<Fp8*>(codes.data()), P::ref(src), scale, max_value, src.numel(), device);
      MIXTRAIN_CUDA_CHECK_LAUNCH("quantize_kernel");
    });
  });
}

int64_t CudaBackend::do_mx_quantize(const Tensor& codes, const Tensor& block_scales,
                                    const Tensor& src, MxAxis axis) {
  constexpr const char* kOp = "mx_quantize";
  const cudaStream_t stream = begin_op();
  if (src.numel() == 0) return 0;
  const BlockGeometry g = geometry(codes.dim(0), codes.dim(1), axis);
  const Fp8Format format = fp8_format(codes.dtype());
  const DeviceStats stats = with_device_stats(*this, stream, [&](DeviceStats* device) {
    gpu::dispatch_fp8(codes.dtype(), [&](auto fp8_tag) {
      using Fp8 = decltype(fp8_tag);
      gpu::dispatch_compute({&src}, kOp, [&](auto policy) {
        using P = decltype(policy);
        mx_quantize_kernel<<<gpu::grid_blocks(g.lines() * g.blocks_per_line), gpu::kBlockThreads, 0,
                             stream>>>(static_cast<Fp8*>(codes.data()),
                                       static_cast<uint8_t*>(block_scales.data()), P::ref(src), g,
                                       fp8_emax(format), fp8_max(format), device);
        MIXTRAIN_CUDA_CHECK_LAUNCH("mx_quantize_kernel");
      });
    });
  });
  return static_cast<int64_t>(stats.count);
}

void CudaBackend::do_dequantize_fp8(const Tensor& dst, const Fp8Operand& src) {
  constexpr const char* kOp = "dequantize_fp8";
  const cudaStream_t stream = begin_op();
  const int64_t n = dst.numel();
  if (n == 0) return;
  gpu::dispatch_fp8(src.codes.dtype(), [&](auto fp8_tag) {
    using Fp8 = decltype(fp8_tag);
    gpu::dispatch_compute({&dst}, kOp, [&](auto policy) {
      using P = decltype(policy);
      const auto* codes = static_cast<const Fp8*>(src.codes.data());
      if (src.block_scales.defined()) {
        mx_dequantize_kernel<<<gpu::grid_blocks(n), gpu::kBlockThreads, 0, stream>>>(
            P::ref(dst), codes, static_cast<const uint8_t*>(src.block_scales.data()),
            geometry(src.codes.dim(0), src.codes.dim(1), src.block_axis));
        MIXTRAIN_CUDA_CHECK_LAUNCH("mx_dequantize_kernel");
      } else {
        dequantize_kernel<<<gpu::grid_blocks(n), gpu::kBlockThreads, 0, stream>>>(
            P::ref(dst), codes, 1.0f / src.scale, n);
        MIXTRAIN_CUDA_CHECK_LAUNCH("dequantize_kernel");
      }
    });
  });
}

}  // namespace mixtrain
