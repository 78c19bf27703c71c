// Why: the per-tensor fp8 statistics every backend shares (backend.h):
// the slot layout a quantize kernel folds into (amax as fp32 bits, whose
// integer max orders like |x|; the saturation count as 64 bits, so the
// device side is two atomics and the host side one copy), its reading,
// and the synchronous quantize_fp8 on top of quantize_fp8_into.
#include <bit>
#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"

namespace mixtrain {
Tensor Backend::fp8_stats_tensor(int64_t slots) {
  return zeros({slots * kFp8StatsWords}, DType::kI32, MemoryCategory::kWorkspace);
}

std::vector<Fp8QuantizeStats> Backend::read_fp8_stats(const Tensor& stats) {
  MIXTRAIN_CHECK_ARG(stats.dtype() == DType::kI32 && stats.numel() % kFp8StatsWords == 0,
                     "read_fp8_stats: " + stats.describe() + " is not a tensor of stats slots");
  std::vector<uint32_t> words(static_cast<size_t>(stats.numel()));
  copy_to_host(words.data(), stats);
  std::vector<Fp8QuantizeStats> out;
  for (size_t i = 0; i < words.size(); i += kFp8StatsWords) {
    const uint64_t count = words[i + 2] | (uint64_t{words[i + 3]} << 32);
    out.push_back({std::bit_cast<float>(words[i]), static_cast<int64_t>(count)});
  }
  return out;
}

Fp8QuantizeStats Backend::quantize_fp8(const Tensor& codes, const Tensor& src, float scale) {
  const Tensor stats = fp8_stats_tensor(1);
  quantize_fp8_into(codes, src, scale, stats, 0);
  return read_fp8_stats(stats)[0];
}

}  // namespace mixtrain
