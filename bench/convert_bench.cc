// Why: conversions run on every step (master weights -> compute copies,
// gradients back), so their speed is worth watching. Reports GB/s (bytes
// read + written, 10^9) per conversion at 16M elements, for convert() (the
// dispatched, multi-threaded path), each vector ISA's loops on one thread,
// and a plain loop over the scalar function, also on one thread; and the
// fp8 quantizers of compute fp8 (bf16 in: the scaled cast with its amax
// and saturation count, MXFP8 blocks along either axis of a 4096 x 4096
// matrix) next to the bf16 -> fp32 and fp32 -> E4M3 conversions.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/numerics/convert.h"
#include "engine/numerics/convert_kernels.h"
#include "engine/numerics/float16.h"
#include "engine/numerics/fp8.h"
#include "engine/numerics/fp8_scaling.h"
#include "engine/numerics/mx_scaling.h"

namespace mixtrain {
namespace {

using convert_detail::ConvertIsa;

constexpr size_t kElements = size_t{1} << 24;

// Source data of a dtype: normal-distributed values (std 4) converted once,
// so every path sees the same realistic mix of exponents.
std::vector<uint8_t> make_source(DType type) {
  std::vector<float> values(kElements);
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (float& v : values) v = normal(rng);
  std::vector<uint8_t> bytes(kElements * dtype_size(type));
  convert(values.data(), DType::kF32, bytes.data(), type, kElements);
  return bytes;
}

// The straightforward loop a kernel would write, one thread.
void scalar_loop(const void* src, DType src_type, void* dst, DType dst_type) {
  if (src_type == DType::kF32) {
    const auto* in = static_cast<const float*>(src);
    if (dst_type == DType::kF16) {
      auto* out = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < kElements; ++i) out[i] = float_to_half_bits(in[i]);
    } else if (dst_type == DType::kBF16) {
      auto* out = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < kElements; ++i) out[i] = float_to_bf16_bits(in[i]);
    } else {
      auto* out = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < kElements; ++i) out[i] = float_to_fp8(in[i], Fp8Format::kE4M3);
    }
    return;
  }
  auto* out = static_cast<float*>(dst);
  if (src_type == DType::kF16) {
    const auto* in = static_cast<const uint16_t*>(src);
    for (size_t i = 0; i < kElements; ++i) out[i] = half_bits_to_float(in[i]);
  } else if (src_type == DType::kBF16) {
    const auto* in = static_cast<const uint16_t*>(src);
    for (size_t i = 0; i < kElements; ++i) out[i] = bf16_bits_to_float(in[i]);
  } else {
    const auto* in = static_cast<const uint8_t*>(src);
    for (size_t i = 0; i < kElements; ++i) out[i] = fp8_to_float(in[i], Fp8Format::kE4M3);
  }
}

enum class Path { kDispatched, kAvx2OneThread, kAvx512OneThread, kScalarLoop };

void BM_Convert(benchmark::State& state, DType src_type, DType dst_type, Path path) {
  if (path == Path::kAvx2OneThread && !convert_detail::convert_isa_available(ConvertIsa::kAvx2)) {
    state.SkipWithError("no AVX2 + F16C on this CPU");
    return;
  }
  if (path == Path::kAvx512OneThread &&
      !convert_detail::convert_isa_available(ConvertIsa::kAvx512)) {
    state.SkipWithError("no AVX-512 on this CPU");
    return;
  }
  std::vector<uint8_t> src = make_source(src_type);
  std::vector<uint8_t> dst(kElements * dtype_size(dst_type), 1);  // touched: no page faults
  // The one-thread paths call convert_using() on chunks smaller than its
  // threading threshold, so each call stays on this thread.
  constexpr size_t kChunk = size_t{1} << 15;
  auto one_thread = [&](ConvertIsa isa) {
    for (size_t begin = 0; begin < kElements; begin += kChunk) {
      convert_detail::convert_using(isa, src.data() + begin * dtype_size(src_type), src_type,
                                    dst.data() + begin * dtype_size(dst_type), dst_type, kChunk,
                                    true);
    }
  };
  for (auto _ : state) {
    switch (path) {
      case Path::kDispatched: convert(src.data(), src_type, dst.data(), dst_type, kElements); break;
      case Path::kAvx2OneThread: one_thread(ConvertIsa::kAvx2); break;
      case Path::kAvx512OneThread: one_thread(ConvertIsa::kAvx512); break;
      case Path::kScalarLoop: scalar_loop(src.data(), src_type, dst.data(), dst_type); break;
    }
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  double bytes = static_cast<double>(kElements * (dtype_size(src_type) + dtype_size(dst_type)));
  state.counters["GB/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}

// How compute fp8 quantizes a bf16 operand.
enum class Quantizer { kPerTensor, kMxAlongRows, kMxAlongColumns };

void BM_Quantize(benchmark::State& state, Quantizer quantizer) {
  const std::vector<uint8_t> src = make_source(DType::kBF16);
  const auto* values = reinterpret_cast<const BFloat16*>(src.data());
  std::vector<uint8_t> codes(kElements, 1);
  constexpr int64_t kSide = 4096;  // kElements = kSide^2
  const MxAxis axis =
      quantizer == Quantizer::kMxAlongColumns ? MxAxis::kAlongColumns : MxAxis::kAlongRows;
  std::vector<uint8_t> scales(static_cast<size_t>(mx_scale_count(kSide, kSide, axis)), 1);
  for (auto _ : state) {
    if (quantizer == Quantizer::kPerTensor) {
      benchmark::DoNotOptimize(
          quantize_fp8(values, kElements, 20.0f, Fp8Format::kE4M3, codes.data()));
    } else {
      benchmark::DoNotOptimize(
          mx_quantize(values, kSide, kSide, axis, Fp8Format::kE4M3, codes.data(), scales.data()));
    }
    benchmark::ClobberMemory();
  }
  const double scale_bytes = quantizer == Quantizer::kPerTensor ? 0.0 : scales.size();
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(kElements) * 3 + scale_bytes,
                                              benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}

void register_all() {
  const struct {
    DType src, dst;
  } pairs[] = {{DType::kF32, DType::kF16},     {DType::kF32, DType::kBF16},
               {DType::kF16, DType::kF32},     {DType::kBF16, DType::kF32},
               {DType::kF32, DType::kFP8E4M3}, {DType::kFP8E4M3, DType::kF32}};
  const struct {
    Path path;
    const char* name;
  } paths[] = {{Path::kDispatched, "dispatched"},
               {Path::kAvx512OneThread, "avx512_1thread"},
               {Path::kAvx2OneThread, "avx2_1thread"},
               {Path::kScalarLoop, "scalar_loop_1thread"}};
  for (const auto& [quantizer, name] :
       {std::pair{Quantizer::kPerTensor, "quantize/bf16_to_fp8_e4m3/per_tensor"},
        {Quantizer::kMxAlongRows, "quantize/bf16_to_fp8_e4m3/mx_along_rows"},
        {Quantizer::kMxAlongColumns, "quantize/bf16_to_fp8_e4m3/mx_along_columns"}}) {
    benchmark::RegisterBenchmark(name, BM_Quantize, quantizer)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  for (const auto& pair : pairs) {
    for (const auto& path : paths) {
      std::string name = std::string("convert/") + dtype_name(pair.src) + "_to_" +
                         dtype_name(pair.dst) + "/" + path.name;
      benchmark::RegisterBenchmark(name.c_str(), BM_Convert, pair.src, pair.dst, path.path)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
}

}  // namespace
}  // namespace mixtrain

int main(int argc, char** argv) {
  mixtrain::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
