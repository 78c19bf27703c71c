// Why: the ZeRO formulas, the summary JSON and the memory metrics are all
// checked against the tracker, so it is itself checked to the byte here:
// known tensors, frees, views, peaks and the two pools.
#include "engine/backend/memory_tracker.h"

#include <gtest/gtest.h>

#include "engine/backend/backend.h"
#include "engine/common/error.h"

namespace mixtrain {
namespace {

using C = MemoryCategory;
using P = MemoryPool;

TEST(MemoryTracker, CountsEachAllocationInItsCategoryAndPool) {
  auto backend = make_backend("cpu");
  MemoryTracker& mem = backend->memory();
  Tensor params = backend->empty({10, 3}, DType::kBF16, C::kParams);           // 60 B
  Tensor master = backend->empty({10, 3}, DType::kF32, C::kMasterParams);      // 120 B
  Tensor m = backend->empty({30}, DType::kF32, C::kOptimizerState, P::kHost);  // 120 B
  Tensor v = backend->empty({30}, DType::kF32, C::kOptimizerState, P::kHost);  // 120 B
  Tensor ids = backend->empty({7}, DType::kI32, C::kActivations);              // 28 B
  Tensor q = backend->empty({5}, DType::kFP8E4M3, C::kWorkspace);              // 5 B

  EXPECT_EQ(mem.current(P::kDevice, C::kParams), 60u);
  EXPECT_EQ(mem.current(P::kDevice, C::kMasterParams), 120u);
  EXPECT_EQ(mem.current(P::kDevice, C::kOptimizerState), 0u);
  EXPECT_EQ(mem.current(P::kHost, C::kOptimizerState), 240u);
  EXPECT_EQ(mem.current(P::kDevice, C::kActivations), 28u);
  EXPECT_EQ(mem.current(P::kDevice, C::kWorkspace), 5u);
  EXPECT_EQ(mem.current_total(P::kDevice), 60u + 120u + 28u + 5u);
  EXPECT_EQ(mem.current_total(P::kHost), 240u);
  for (C c : {C::kGrads, C::kGatheredParams, C::kCommBuffers}) {
    EXPECT_EQ(mem.current(P::kDevice, c), 0u) << memory_category_name(c);
    EXPECT_EQ(mem.current(P::kHost, c), 0u) << memory_category_name(c);
  }
  EXPECT_EQ(params.pool(), P::kDevice);
  EXPECT_EQ(m.pool(), P::kHost);
  EXPECT_EQ(m.category(), C::kOptimizerState);
}

TEST(MemoryTracker, FreesAndPeaksAreExact) {
  auto backend = make_backend("cpu");
  MemoryTracker& mem = backend->memory();
  {
    Tensor a = backend->empty({1000}, DType::kF32, C::kActivations);  // 4000 B
    {
      Tensor b = backend->empty({500}, DType::kF16, C::kActivations);  // 1000 B
      EXPECT_EQ(mem.current(P::kDevice, C::kActivations), 5000u);
    }
    EXPECT_EQ(mem.current(P::kDevice, C::kActivations), 4000u);
    EXPECT_EQ(mem.peak(P::kDevice, C::kActivations), 5000u);
    Tensor g = backend->empty({100}, DType::kBF16, C::kGrads);  // 200 B
    EXPECT_EQ(mem.current_total(P::kDevice), 4200u);
    EXPECT_EQ(mem.peak_total(P::kDevice), 5000u);  // 4000 + 1000 was higher
  }
  EXPECT_EQ(mem.current_total(P::kDevice), 0u);
  EXPECT_EQ(mem.peak(P::kDevice, C::kActivations), 5000u);
  EXPECT_EQ(mem.peak(P::kDevice, C::kGrads), 200u);
  EXPECT_EQ(mem.peak_total(P::kHost), 0u);

  mem.reset_peaks();
  EXPECT_EQ(mem.peak(P::kDevice, C::kActivations), 0u);
  EXPECT_EQ(mem.peak_total(P::kDevice), 0u);
  Tensor w = backend->empty({8}, DType::kF32, C::kWorkspace);
  EXPECT_EQ(mem.peak_total(P::kDevice), 32u);
}

TEST(MemoryTracker, ViewsAndCopiesShareOneCountedAllocation) {
  auto backend = make_backend("cpu");
  MemoryTracker& mem = backend->memory();
  Tensor flat = backend->empty({64}, DType::kF32, C::kGrads);  // 256 B
  Tensor part = flat.view(16, {4, 4});
  Tensor alias = flat;
  Tensor reshaped = part.reshape({16});
  EXPECT_EQ(mem.current(P::kDevice, C::kGrads), 256u);
  flat = Tensor();
  alias = Tensor();
  EXPECT_EQ(mem.current(P::kDevice, C::kGrads), 256u);  // the views keep it alive
  part = Tensor();
  reshaped = Tensor();
  EXPECT_EQ(mem.current(P::kDevice, C::kGrads), 0u);
  EXPECT_EQ(mem.peak(P::kDevice, C::kGrads), 256u);
}

TEST(MemoryTracker, ZeroSizedTensorsCountNothing) {
  auto backend = make_backend("cpu");
  Tensor z = backend->empty({0, 384}, DType::kBF16, C::kActivations);
  EXPECT_EQ(z.numel(), 0);
  EXPECT_EQ(backend->memory().current(P::kDevice, C::kActivations), 0u);
}

TEST(MemoryTracker, ViewOutsideTheTensorIsRefused) {
  auto backend = make_backend("cpu");
  Tensor t = backend->empty({10}, DType::kF32, C::kParams);
  EXPECT_THROW(t.view(8, {3}), EngineError);
  EXPECT_THROW(t.reshape({3, 3}), EngineError);
}

// Issues 13, 17: an allocation that cannot be served names what it was
// for, how much the pool already holds and its peak by category, and
// leaves the counts as they were.
TEST(MemoryTracker, AnAllocationThatDoesNotFitSaysWhatItWasFor) {
  auto backend = make_backend("cpu");
  Tensor held = backend->empty({1024}, DType::kF32, C::kParams);
  try {
    backend->empty({int64_t{1} << 58}, DType::kF32, C::kMasterParams);
    FAIL() << "an allocation of 1 EiB succeeded";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find(
                  "out of memory: needed 1.07e+09 GiB more for master_params in the device pool, "
                  "which holds 3.81e-06 GiB already; peak by category: params 3.81e-06 GiB"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(backend->memory().current(P::kDevice, C::kMasterParams), 0u);
  EXPECT_EQ(backend->memory().current_total(P::kDevice), 4096u);
}

// A rank's RAM limit: on the CPU backend both pools count against it; on a
// GPU only the host pool. Past it an allocation fails as out of memory
// naming the limit, and the counts stay as they were.
TEST(MemoryTracker, AllocationsPastTheRamLimitFailNamingIt) {
  auto backend = make_backend("cpu");
  backend->memory().set_ram_limit(8192, /*device_in_ram=*/true);
  Tensor device = backend->empty({1024}, DType::kF32, C::kParams);
  Tensor host = backend->empty({512}, DType::kF32, C::kOptimizerState, P::kHost);
  try {
    backend->empty({513}, DType::kF32, C::kActivations);
    FAIL() << "allocated past the limit";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("out of memory: needed 1.91e-06 GiB more for activations "
                                         "in the device pool"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("past this rank's memory limit of 7.63e-06 GiB"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(backend->memory().current_total(P::kDevice), 4096u);
  Tensor last = backend->empty({512}, DType::kF32, C::kActivations);  // exactly the limit
  EXPECT_EQ(backend->memory().current_total(P::kDevice), 6144u);

  backend->memory().set_ram_limit(8192, /*device_in_ram=*/false);  // a GPU: only host counts
  Tensor large = backend->empty({1 << 16}, DType::kF32, C::kActivations);
  EXPECT_THROW(backend->empty({2048}, DType::kF32, C::kOptimizerState, P::kHost), EngineError);
  backend->memory().set_ram_limit(0, true);
  Tensor free = backend->empty({1 << 16}, DType::kF32, C::kOptimizerState, P::kHost);
}

TEST(MemoryTracker, NamesMatchTheSummaryJson) {
  EXPECT_STREQ(memory_pool_name(P::kDevice), "device");
  EXPECT_STREQ(memory_pool_name(P::kHost), "host");
  const char* expected[] = {"params",          "grads",       "master_params",
                            "optimizer_state", "activations", "gathered_params",
                            "comm_buffers",    "workspace",   "data"};
  ASSERT_EQ(std::size(expected), static_cast<size_t>(kNumMemoryCategories));
  for (int i = 0; i < kNumMemoryCategories; ++i) {
    EXPECT_STREQ(memory_category_name(static_cast<C>(i)), expected[i]);
  }
}

// Tokens are held in RAM whatever the backend: data is a host category only.
TEST(MemoryTracker, DataIsListedOnTheHostOnly) {
  EXPECT_FALSE(memory_category_in_pool(P::kDevice, C::kData));
  EXPECT_TRUE(memory_category_in_pool(P::kHost, C::kData));
  EXPECT_TRUE(memory_category_in_pool(P::kDevice, C::kWorkspace));
  EXPECT_FALSE(memory_category_in_pool(P::kHost, C::kWorkspace));
  EXPECT_TRUE(memory_category_in_pool(P::kHost, C::kOptimizerState));
}

}  // namespace
}  // namespace mixtrain
