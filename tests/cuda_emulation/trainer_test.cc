// Why: the whole training step on the emulated CUDA backend against the
// CPU backend, for every ZeRO stage and both offloads (world size 1): how
// the model and ZeroEngine use the CUDA backend (views, scratch, the host
// pool, the transfer stream and its events) is checked under
// AddressSanitizer, which the op-by-op parity suite does not reach. Work
// on the emulated streams runs as late as CUDA allows (stream_queues.h), so
// a missing wait between the streams, the communicator-free host code and
// the pinned buffers shows as a difference or an ASan report; it also
// checks that training never waits for the whole device (no
// cudaDeviceSynchronize, no cudaFree).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/backend/backend.h"
#include "runtime_calls.h"
#include "train/train_test_util.h"

namespace mixtrain::train_test {
namespace {

struct Case {
  DType compute;
  int64_t stage;
  bool offload_optimizer;
  bool offload_params;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(dtype_name(c.compute)) + "_stage" + std::to_string(c.stage) +
         (c.offload_optimizer ? "_offload_optimizer" : "") +
         (c.offload_params ? "_offload_params" : "");
}

class CudaEmulationTrainer : public ::testing::TestWithParam<Case> {};

TEST_P(CudaEmulationTrainer, ThreeStepsMatchTheCpuBackend) {
  const Case c = GetParam();
  std::vector<float> weights[2];
  std::optional<double> loss[2];
  const char* backends[] = {"cuda", "cpu"};
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
    const emu::RuntimeCalls before = emu::runtime_calls();
    {
      Trainer trainer(*backend, spec, {});
      loss[i] = trainer.run().final_train_loss;
      weights[i] = master_of(trainer);
    }
    const emu::RuntimeCalls after = emu::runtime_calls();
    EXPECT_EQ(after.device_synchronizations, before.device_synchronizations) << backends[i];
    EXPECT_EQ(after.blocking_frees, before.blocking_frees) << backends[i];
  }
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
  // without the fusion), so 3% are allowed.
  EXPECT_LE(far, fp32 ? 0u : weights[0].size() * 3 / 100)
      << far << " of " << weights[0].size() << " weights differ by more than 1e-3";
  EXPECT_LT(worst, 0.07);
}

INSTANTIATE_TEST_SUITE_P(ZeroStages, CudaEmulationTrainer,
                         ::testing::Values(Case{DType::kF32, 0, false, false},
                                           Case{DType::kBF16, 0, false, false},
                                           Case{DType::kF16, 1, true, false},
                                           Case{DType::kBF16, 2, true, false},
                                           Case{DType::kBF16, 3, true, true}),
                         case_name);

}  // namespace
}  // namespace mixtrain::train_test
