// Why: the whole training step on the emulated CUDA backend against the
// CPU backend, for every ZeRO stage and both offloads (world size 1): how
// the model and ZeroEngine use the CUDA backend (views, scratch, the host
// pool, the transfer stream and its events) is checked under
// AddressSanitizer, which the op-by-op parity suite does not reach. Work
// on the emulated streams runs as late as CUDA allows (stream_queues.h), so
// a missing wait between the streams, the communicator-free host code and
// the pinned buffers shows as a difference or an ASan report; it also
// checks that training never waits for the whole device (no
// cudaDeviceSynchronize, no cudaFree). Compute fp8 runs each recipe; the
// per-tensor ones must reach cuBLASLt's fp8 GEMMs (every GEMM of the
// blocks, forward and backward), mxfp8 the dequantizing path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "engine/backend/backend.h"
#include "engine/backend/device_reserve.h"
#include "engine/comm/make_communicator.h"
#include "engine/comm/memory_store.h"
#include "engine/common/error.h"
#include "engine/plan/memory_plan.h"
#include "runtime_calls.h"
#include "train/train_test_util.h"

namespace mixtrain::train_test {
namespace {

struct Case {
  DType compute;
  int64_t stage;
  bool offload_optimizer;
  bool offload_params;
  config::Fp8Scaling scaling = config::Fp8Scaling::kDelayed;  // with compute fp8
  int sm = 90;                                                // the emulated device
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  const bool fp8 = c.compute == DType::kFP8E4M3;
  return (fp8 ? "fp8_" + std::string(config::enum_name(c.scaling))
              : std::string(dtype_name(c.compute))) +
         "_stage" + std::to_string(c.stage) + (c.sm != 90 ? "_sm" + std::to_string(c.sm) : "") +
         (c.offload_optimizer ? "_offload_optimizer" : "") +
         (c.offload_params ? "_offload_params" : "");
}

class CudaEmulationTrainer : public ::testing::TestWithParam<Case> {};

TEST_P(CudaEmulationTrainer, ThreeStepsMatchTheCpuBackend) {
  const Case c = GetParam();
  std::vector<float> weights[2];
  std::optional<double> loss[2];
  const char* backends[] = {"cuda", "cpu"};
  setenv("MIXTRAIN_EMULATED_SM", std::to_string(c.sm).c_str(), 1);
  for (int i = 0; i < 2; ++i) {
    const std::unique_ptr<Backend> backend = make_backend(backends[i]);
    config::JobSpec spec = tiny_spec(c.compute, 3, fresh_dir(backends[i]));
    // A quarter of tiny_spec's 4 x 32 tokens, to keep the test short.
    spec.train.micro_batch = 2;
    spec.model.seq_len = 16;
    spec.train.eval_batches = 1;
    spec.zero.stage = c.stage;
    if (c.offload_optimizer) spec.zero.offload_optimizer = config::OffloadTarget::kCpu;
    if (c.offload_params) spec.zero.offload_params = config::OffloadTarget::kCpu;
    if (c.compute == DType::kFP8E4M3) spec.precision.fp8 = config::Fp8Spec{.scaling = c.scaling};
    const emu::RuntimeCalls before = emu::runtime_calls();
    {
      Trainer trainer(*backend, spec, {});
      loss[i] = trainer.run().final_train_loss;
      weights[i] = master_of(trainer);
    }
    const emu::RuntimeCalls after = emu::runtime_calls();
    EXPECT_EQ(after.device_synchronizations, before.device_synchronizations) << backends[i];
    EXPECT_EQ(after.blocking_frees, before.blocking_frees) << backends[i];
    if (i == 0 && c.compute == DType::kFP8E4M3) {
      // 3 steps x 2 blocks x 4 GEMMs x (forward, din, dW), and the evals'
      // forwards; none for MX blocks before sm_100 (no block scaling).
      const int fp8_gemms = after.lt_fp8_matmuls - before.lt_fp8_matmuls;
      if (c.scaling == config::Fp8Scaling::kMxfp8 && c.sm < 100) {
        EXPECT_EQ(fp8_gemms, 0);
      } else {
        EXPECT_GE(fp8_gemms, 3 * 2 * 4 * 3);
      }
    }
  }
  unsetenv("MIXTRAIN_EMULATED_SM");
  ASSERT_TRUE(loss[0] && loss[1]);
  const bool fp32 = c.compute == DType::kF32;
  EXPECT_NEAR(*loss[0], *loss[1], fp32 ? 1e-4 : 2e-2);
  ASSERT_EQ(weights[0].size(), weights[1].size());
  size_t far = 0;
  double worst = 0.0;
  for (size_t i = 0; i < weights[0].size(); ++i) {
    const double d = std::fabs(weights[0][i] - weights[1][i]);
    worst = std::max(worst, d);
    if (d > 1e-3) ++far;
  }
  // Adam's first steps move each weight by about lr = 1e-2 whatever the
  // gradient's size, so a near-zero gradient whose sign differs moves it
  // the other way: a few such weights are allowed in 16-bit runs, none in
  // fp32. CUDA's MLP takes GELU in cuBLASLt's epilogue, of the fp32
  // pre-activation, where the CPU takes it of the 16-bit rounded one: in
  // bf16 that flips 2.3% of the weights after three steps (under 1%
  // without the fusion), so 3% are allowed. In fp8 a 1-ulp bf16
  // difference moves a value to another code (3 mantissa bits): 19.7%
  // (delayed), 27.1% (current) and 20.6% (mxfp8, which runs the same
  // dequantizing GEMM as the CPU) differ, so 30% are allowed there; the
  // GEMM itself is held to the CPU's in edge_sizes_test.
  const size_t allowed = fp32                           ? 0u
                         : c.compute == DType::kFP8E4M3 ? weights[0].size() * 30 / 100
                                                        : weights[0].size() * 3 / 100;
  EXPECT_LE(far, allowed) << far << " of " << weights[0].size()
                          << " weights differ by more than 1e-3";
  EXPECT_LT(worst, 0.07);
}

// Delayed fp8 gathers every quantization's amax and saturations on the
// device and reads them once per step: three steps wait for the stream
// at most three times more than bf16 does (a synchronous quantize waited
// once per quantized operand: 2 blocks x 4 GEMMs x 4 operands a step).
TEST(CudaEmulationFp8, DelayedScalingWaitsForTheDeviceOncePerStep) {
  int waits[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const std::unique_ptr<Backend> backend = make_backend("cuda");
    config::JobSpec spec = tiny_spec(i == 0 ? DType::kBF16 : DType::kFP8E4M3, 3,
                                     fresh_dir(i == 0 ? "waits_bf16" : "waits_fp8"));
    spec.train.micro_batch = 2;
    spec.model.seq_len = 16;
    spec.train.eval_batches = 1;
    const int before = emu::runtime_calls().stream_synchronizations;
    Trainer(*backend, spec, {}).run();
    waits[i] = emu::runtime_calls().stream_synchronizations - before;
  }
  EXPECT_LE(waits[1] - waits[0], 3) << "bf16 " << waits[0] << ", fp8 " << waits[1];
}

// The workspace the CUDA backend holds at its peak is what the planner
// counts for it: cuBLAS's and the scratch buffer at the attention
// backward's size, both sized by the functions the backend allocates by
// (cuda_workspace.h; issue 32). Its scores (4 x 4 x 256 x 256 in fp32 and
// their bf16 gradient: 6 MiB) outgrow the scratch's 2 MiB steps, so a
// planner that sized them its own way would be off.
TEST(CudaEmulationPlan, TheWorkspaceIsWhatThePlannerCounts) {
  config::JobSpec spec = tiny_spec(DType::kBF16, 1, fresh_dir("plan"));
  spec.model.layers = 1;
  spec.model.heads = 4;
  spec.model.dim = 64;
  spec.model.seq_len = 256;
  spec.train.eval_batches = 1;
  const std::unique_ptr<Backend> backend = make_backend("cuda");
  (void)Trainer(*backend, spec, {}).run();
  plan::PlanTarget target;
  target.cuda = true;
  const int64_t planned =
      plan::plan_memory(spec, target).at(MemoryPool::kDevice, MemoryCategory::kWorkspace);
  EXPECT_EQ(static_cast<int64_t>(
                backend->memory().peak(MemoryPool::kDevice, MemoryCategory::kWorkspace)),
            planned);
  EXPECT_EQ(planned, (int64_t{32} + 6) << 20);  // cuBLAS's on sm_90, and the 6 MiB
}

// A rank's communicator first leaves its device the reserve the planner
// counts for NCCL's buffers (device_reserve.h; issue 31): the pool gives
// that much back from then on, whether or not NCCL is in this build.
TEST(CudaEmulationComm, ARanksCommunicatorLeavesNcclItsReserveFirst) {
  const std::unique_ptr<Backend> backend = make_backend("cuda");
  MemoryStore store;
  try {
    (void)make_rank_communicator(*backend, store, 0, 4);
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable) << e.what();  // the emulation has no NCCL
  }
  EXPECT_EQ(emu::runtime_calls().pool_release_threshold,
            emu::kDeviceMemoryBytes - device_reserve(4).total());
}

// Activation checkpointing on the CUDA backend: the recompute's kernels
// run on the compute stream into the shared block buffers, read by the
// backward that follows (a missing order shows under ASan or as a
// difference). blocks reruns the forward's very kernels, so its weights
// are those of keeping everything, bit for bit; selective runs the GELU
// apart from its GEMM in forward and recompute alike, where none takes it
// in the GEMM's epilogue from the fp32 pre-activation, so it may differ
// from none as the CPU does from CUDA (2.3% in bf16 after three steps).
TEST(CudaEmulationCheckpointing, RecomputeGivesTheWeightsOfKeepingEverything) {
  for (const DType compute : {DType::kBF16, DType::kFP8E4M3}) {
    std::vector<float> weights[3];
    const config::ActivationCheckpointing modes[] = {config::ActivationCheckpointing::kNone,
                                                     config::ActivationCheckpointing::kBlocks,
                                                     config::ActivationCheckpointing::kSelective};
    for (int i = 0; i < 3; ++i) {
      const std::unique_ptr<Backend> backend = make_backend("cuda");
      const std::string name =
          std::string(dtype_name(compute)) + "_" + std::string(config::enum_name(modes[i]));
      config::JobSpec spec = tiny_spec(compute, 3, fresh_dir(name));
      spec.train.micro_batch = 2;
      spec.model.seq_len = 16;
      spec.train.eval_batches = 1;
      spec.train.activation_checkpointing = modes[i];
      spec.zero.stage = 3;
      spec.zero.offload_optimizer = config::OffloadTarget::kCpu;
      spec.zero.offload_params = config::OffloadTarget::kCpu;
      Trainer trainer(*backend, spec, {});
      trainer.run();
      weights[i] = master_of(trainer);
    }
    SCOPED_TRACE(dtype_name(compute));
    EXPECT_TRUE(weights[1] == weights[0]) << "blocks changed the weights";
    ASSERT_EQ(weights[2].size(), weights[0].size());
    size_t far = 0;
    for (size_t i = 0; i < weights[0].size(); ++i)
      far += std::fabs(weights[2][i] - weights[0][i]) > 1e-3;
    EXPECT_LE(far, weights[0].size() * (compute == DType::kBF16 ? 3 : 30) / 100);
  }
}

INSTANTIATE_TEST_SUITE_P(
    ZeroStages, CudaEmulationTrainer,
    ::testing::Values(Case{DType::kF32, 0, false, false}, Case{DType::kBF16, 0, false, false},
                      Case{DType::kF16, 1, true, false}, Case{DType::kBF16, 2, true, false},
                      Case{DType::kBF16, 3, true, true}, Case{DType::kFP8E4M3, 0, false, false},
                      Case{DType::kFP8E4M3, 1, false, false, config::Fp8Scaling::kCurrent},
                      Case{DType::kFP8E4M3, 2, false, false, config::Fp8Scaling::kMxfp8},
                      Case{DType::kFP8E4M3, 0, false, false, config::Fp8Scaling::kMxfp8, 100}),
    case_name);

}  // namespace
}  // namespace mixtrain::train_test
