// Why: the one entry point for bulk format conversion. It picks the widest
// instruction set once, pivots pairs that do not involve fp32 through a
// small fp32 buffer in L1, and splits large arrays across OpenMP threads.
#include "engine/numerics/convert.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "engine/common/cpu_features.h"
#include "engine/numerics/convert_kernels.h"

namespace mixtrain {
namespace convert_detail {
namespace {

// Below this many elements a conversion stays on the calling thread (the
// fork/join costs more than it saves); above it, threads take chunks.
constexpr size_t kParallelThreshold = size_t{1} << 16;
// Threads take chunks dynamically, so a core busy with other work (data
// loading, the other ranks) slows the conversion less than a static split.
constexpr size_t kThreadChunk = size_t{1} << 15;
// fp32 elements of the pivot buffer for pairs without an fp32 side (8 KiB).
constexpr size_t kPivotBlock = 2048;

bool is_convertible(DType t) { return t != DType::kI32 && t != DType::kE8M0; }

ToF32Kernel to_f32_kernel(const ConvertKernels& k, DType t) {
  switch (t) {
    case DType::kF16: return k.f16_to_f32;
    case DType::kBF16: return k.bf16_to_f32;
    case DType::kFP8E4M3: return k.e4m3_to_f32;
    case DType::kFP8E5M2: return k.e5m2_to_f32;
    default: return nullptr;
  }
}

FromF32Kernel from_f32_kernel(const ConvertKernels& k, DType t) {
  switch (t) {
    case DType::kF16: return k.f32_to_f16;
    case DType::kBF16: return k.f32_to_bf16;
    case DType::kFP8E4M3: return k.f32_to_e4m3;
    case DType::kFP8E5M2: return k.f32_to_e5m2;
    default: return nullptr;
  }
}

const ConvertKernels& kernels_for(ConvertIsa isa) {
  switch (isa) {
    case ConvertIsa::kAvx512: return avx512_kernels();
    case ConvertIsa::kAvx2: return avx2_kernels();
    case ConvertIsa::kPortable: break;
  }
  return portable_kernels();
}

// Converts one contiguous range on the calling thread; src_type != dst_type.
void convert_range(const ConvertKernels& k, const void* src, DType src_type, void* dst,
                   DType dst_type, size_t n, bool saturate_fp8) {
  if (src_type == DType::kF32) {
    from_f32_kernel(k, dst_type)(src, dst, n, saturate_fp8);
    return;
  }
  if (dst_type == DType::kF32) {
    to_f32_kernel(k, src_type)(src, dst, n);
    return;
  }
  ToF32Kernel load = to_f32_kernel(k, src_type);
  FromF32Kernel store = from_f32_kernel(k, dst_type);
  const auto* in = static_cast<const char*>(src);
  auto* out = static_cast<char*>(dst);
  size_t in_size = dtype_size(src_type);
  size_t out_size = dtype_size(dst_type);
  alignas(64) float pivot[kPivotBlock];
  for (size_t begin = 0; begin < n; begin += kPivotBlock) {
    size_t count = std::min(kPivotBlock, n - begin);
    load(in + begin * in_size, pivot, count);
    store(pivot, out + begin * out_size, count, saturate_fp8);
  }
}

}  // namespace

const char* convert_isa_name(ConvertIsa isa) {
  switch (isa) {
    case ConvertIsa::kPortable: return "portable";
    case ConvertIsa::kAvx2: return "avx2";
    case ConvertIsa::kAvx512: return "avx512";
  }
  return "unknown";
}

bool convert_isa_available(ConvertIsa isa) {
  const CpuFeatures& cpu = cpu_features();
  switch (isa) {
    case ConvertIsa::kPortable: return true;
    case ConvertIsa::kAvx2: return cpu.avx2 && cpu.f16c;
    case ConvertIsa::kAvx512: return cpu.has_avx512() && cpu.f16c;
  }
  return false;
}

ConvertIsa best_convert_isa() {
  static const ConvertIsa best = convert_isa_available(ConvertIsa::kAvx512) ? ConvertIsa::kAvx512
                                 : convert_isa_available(ConvertIsa::kAvx2) ? ConvertIsa::kAvx2
                                                                            : ConvertIsa::kPortable;
  return best;
}

void convert_using(ConvertIsa isa, const void* src, DType src_type, void* dst, DType dst_type,
                   size_t n, bool saturate_fp8) {
  MIXTRAIN_CHECK_ARG(is_convertible(src_type) && is_convertible(dst_type),
            std::string("convert: ") + dtype_name(src_type) + " -> " + dtype_name(dst_type) +
                " is not a conversion between float formats");
  MIXTRAIN_CHECK_ARG(convert_isa_available(isa),
            std::string("convert: this CPU cannot run the ") + convert_isa_name(isa) + " kernels");
  if (n == 0) return;
  if (src_type == dst_type) {
    if (src != dst) std::memcpy(dst, src, n * dtype_size(src_type));
    return;
  }
  const ConvertKernels& k = kernels_for(isa);
  if (n < kParallelThreshold || omp_in_parallel()) {
    convert_range(k, src, src_type, dst, dst_type, n, saturate_fp8);
    return;
  }
  const auto* in = static_cast<const char*>(src);
  auto* out = static_cast<char*>(dst);
  size_t in_size = dtype_size(src_type);
  size_t out_size = dtype_size(dst_type);
  size_t chunks = (n + kThreadChunk - 1) / kThreadChunk;
#pragma omp parallel for schedule(dynamic)
  for (size_t c = 0; c < chunks; ++c) {
    size_t begin = c * kThreadChunk;
    size_t count = std::min(kThreadChunk, n - begin);
    convert_range(k, in + begin * in_size, src_type, out + begin * out_size, dst_type, count,
                  saturate_fp8);
  }
}

}  // namespace convert_detail

void convert(const void* src, DType src_type, void* dst, DType dst_type, size_t n,
             ConvertOptions options) {
  convert_detail::convert_using(convert_detail::best_convert_isa(), src, src_type, dst, dst_type, n,
                                options.saturate_fp8);
}

}  // namespace mixtrain
