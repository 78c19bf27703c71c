// Why: the CUDA backend allocates its workspace by these functions and the
// planner predicts it by them (cuda_workspace.h), so their figures are
// pinned here by hand for each dtype the attention runs in: fp16 needs its
// score gradient, q and k and dqkv in fp32; bf16 and fp32 need nothing
// beyond the scores and their gradient.
#include "engine/backend/cuda_workspace.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace mixtrain {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

size_t span_of(const std::vector<ScratchRequest>& requests) {
  return scratch_offsets(requests).back();
}

TEST(CudaWorkspace, CublasGetsThirtyTwoMiBFromHopperOn) {
  EXPECT_EQ(cublas_workspace_bytes(80), size_t(4 * kMiB));
  EXPECT_EQ(cublas_workspace_bytes(89), size_t(4 * kMiB));
  EXPECT_EQ(cublas_workspace_bytes(90), size_t(32 * kMiB));
  EXPECT_EQ(cublas_workspace_bytes(120), size_t(32 * kMiB));
}

TEST(CudaWorkspace, ScratchRequestsStartOn256BytesAndTheBufferGrowsIn2MiB) {
  const std::vector<size_t> offsets =
      scratch_offsets({{{3}, DType::kF32}, {{0}, DType::kBF16}, {{100}, DType::kF16}});
  EXPECT_EQ(offsets, (std::vector<size_t>{0, 256, 256, 512}));
  EXPECT_EQ(scratch_buffer_bytes(1), size_t(2 * kMiB));
  EXPECT_EQ(scratch_buffer_bytes(2 * kMiB), size_t(2 * kMiB));
  EXPECT_EQ(scratch_buffer_bytes(2 * kMiB + 1), size_t(4 * kMiB));
}

TEST(CudaWorkspace, AttentionBackwardScratchFollowsTheGemmDtype) {
  const AttentionDims dims{.batch = 2, .seq = 64, .channels = 32, .heads = 4};
  const size_t bhtt = 2 * 4 * 64 * 64;
  const size_t btc3 = 2 * 64 * 3 * 32;
  for (const DType same : {DType::kBF16, DType::kF32}) {  // dS in the GEMMs' dtype, dqkv direct
    EXPECT_EQ(span_of(attention_backward_scratch(dims, same, same, same, same)),
              bhtt * (4 + dtype_size(same)))
        << dtype_name(same);
  }
  EXPECT_EQ(attention_score_gradient_dtype(DType::kF16), DType::kF32);
  EXPECT_EQ(span_of(attention_backward_scratch(dims, DType::kF16, DType::kF16, DType::kF16,
                                               DType::kF16)),
            bhtt * (4 + 4) + btc3 * 4 + btc3 * 4);  // + dqkv in fp32, q and k in fp32
  // bf16 GEMMs with an fp32 dout and probabilities: both cast to bf16.
  EXPECT_EQ(span_of(attention_backward_scratch(dims, DType::kBF16, DType::kF32, DType::kF32,
                                               DType::kBF16)),
            bhtt * (4 + 2) + 2 * 64 * 32 * 2 + bhtt * 2);
  EXPECT_TRUE(cublas_writes(DType::kBF16, DType::kF32));
  EXPECT_FALSE(cublas_writes(DType::kF32, DType::kF16));
}

}  // namespace
}  // namespace mixtrain
