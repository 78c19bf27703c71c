// Why: see zero_placement.h.
#include "engine/zero/zero_placement.h"

namespace mixtrain {

ZeroSettings zero_settings(const config::ZeroSpec& zero) {
  ZeroSettings out;
  out.stage = static_cast<int>(zero.stage);
  out.offload_optimizer = zero.offload_optimizer == config::OffloadTarget::kCpu;
  out.offload_params = zero.offload_params == config::OffloadTarget::kCpu;
  out.bucket_bytes = zero.bucket_mb << 20;
  out.reduce_in_fp32 = zero.reduce_dtype == config::ReduceDtype::kFp32;
  return out;
}

ZeroPlacement zero_placement(const ZeroSettings& settings, DType compute) {
  const auto extent = [&](int partitioned_from) {
    return settings.stage >= partitioned_from ? Extent::kPartition : Extent::kFull;
  };
  const auto pool = [](bool offloaded) {
    return offloaded ? MemoryPool::kHost : MemoryPool::kDevice;
  };
  ZeroPlacement out;
  out.optimizer = {extent(1), pool(settings.offload_optimizer)};
  out.gradients = {extent(2), MemoryPool::kDevice};
  out.weights = {extent(3), pool(settings.offload_params)};
  out.weights_are_master =
      settings.stage == 0 && compute == DType::kF32 && !settings.offload_optimizer;
  return out;
}

}  // namespace mixtrain
