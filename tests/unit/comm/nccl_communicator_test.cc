// Why: the NCCL communicator cannot run on a machine without a GPU, but
// must be checked wherever one exists: the same collectives as the Gloo
// tests on CUDA tensors, one rank per device (two ranks as threads when
// there are two devices), with exact small-integer sums in every dtype and
// the ring's sent-element counts, and the device memory they hold beside
// the backend's pool. Skips without a device.
#include "engine/comm/nccl/nccl_communicator.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/device_reserve.h"
#include "engine/comm/memory_store.h"
#include "comm_test_util.h"

namespace mixtrain {
namespace {

using comm_test::read_floats;

// A device tensor of `dtype` holding `values`, through a host tensor.
Tensor to_device(Backend& gpu, DType dtype, const std::vector<float>& values) {
  const Tensor host = comm_test::make_tensor(dtype, values);
  Tensor t = gpu.empty(host.shape(), dtype, MemoryCategory::kCommBuffers);
  gpu.copy_from_host(t, host.data());
  return t;
}

std::vector<float> to_host(Backend& gpu, const Tensor& t) {
  Tensor host = comm_test::cpu().empty(t.shape(), t.dtype(), MemoryCategory::kCommBuffers);
  gpu.copy_to_host(host.data(), t);
  return read_floats(host);
}

// What device `rank` holds beside the backend's pool (the context, kernel
// images, NCCL's buffers) is within the reserve the planner counts for it
// (device_reserve.h). The tests of this binary run alone (RUN_SERIAL), so
// the device's used memory is theirs.
void expect_runtime_within_reserve(Backend& gpu, int rank, int world) {
  gpu.synchronize();
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, rank), cudaSuccess);
  uint64_t pool_bytes = 0;
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &pool_bytes),
            cudaSuccess);
  const auto outside = static_cast<int64_t>(total_bytes - free_bytes - pool_bytes);
  std::printf("rank %d of %d: %.1f MiB outside the pool, reserve %.1f MiB\n", rank, world,
              static_cast<double>(outside) / (1 << 20),
              static_cast<double>(device_reserve(world).total()) / (1 << 20));
  EXPECT_LE(outside, device_reserve(world).total());
}

// Runs every collective as `rank` of `world` (device = rank) and checks it.
void check_rank(Store& store, int rank, int world) {
  auto gpu = make_cuda_backend(rank);
  CommOptions options = comm_test::options_with(std::chrono::seconds(60));
  options.cuda_device = rank;
  NcclCommunicator comm(store, rank, world, options);
  const int64_t n = 12;
  std::vector<float> mine(n), sum(n, 0.0f), gathered;
  for (int64_t i = 0; i < n; ++i) mine[i] = static_cast<float>(i + rank);
  for (int r = 0; r < world; ++r) {
    for (int64_t i = 0; i < n; ++i) sum[i] += static_cast<float>(i + r);
  }
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    const CommStats before = comm.stats();
    Tensor t = to_device(*gpu, dtype, mine);
    gpu->synchronize();
    comm.all_reduce(t);
    EXPECT_EQ(to_host(*gpu, t), sum) << dtype_name(dtype);
    EXPECT_EQ(comm.stats().since(before)[CommOp::kAllReduce].elements_sent,
              2 * n * (world - 1) / world);

    Tensor in = to_device(*gpu, dtype, mine);
    Tensor out = to_device(*gpu, dtype, std::vector<float>(n / world, 0.0f));
    gpu->synchronize();
    comm.reduce_scatter(in, out);
    EXPECT_EQ(to_host(*gpu, out), std::vector<float>(sum.begin() + rank * (n / world),
                                                     sum.begin() + (rank + 1) * (n / world)));

    Tensor all = to_device(*gpu, dtype, std::vector<float>(n * world, 0.0f));
    gpu->synchronize();
    comm.all_gather(in, all);
    const std::vector<float> got = to_host(*gpu, all);
    for (int r = 0; r < world; ++r) {
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got[r * n + i], static_cast<float>(i + r));
    }

    Tensor b = to_device(*gpu, dtype, mine);
    gpu->synchronize();
    comm.broadcast(b, 0);
    std::vector<float> root(n);
    for (int64_t i = 0; i < n; ++i) root[i] = static_cast<float>(i);
    EXPECT_EQ(to_host(*gpu, b), root);
  }
  comm.barrier();
}

TEST(NcclCommunicator, EveryCollectiveOnOneOrTwoDevices) {
  const int devices = cuda_device_count();
  if (devices == 0) GTEST_SKIP() << "no CUDA device";
  MemoryStore store;
  check_rank(store, 0, 1);
  if (devices < 2) return;
  MemoryStore pair_store;
  auto other = std::async(std::launch::async, [&] { check_rank(pair_store, 1, 2); });
  check_rank(pair_store, 0, 2);
  other.get();
}

// Measured after collectives of every kind and a range of sizes (NCCL
// connects each algorithm and protocol at its first use), one rank per
// device as a job runs them. gpu-check.sh runs it apart from initcheck,
// whose own allocations would count.
TEST(NcclCommunicator, HoldsNoMoreThanItsReserveBesideThePool) {
  const int devices = cuda_device_count();
  if (devices == 0) GTEST_SKIP() << "no CUDA device";
  const int world = devices >= 2 ? 2 : 1;
  MemoryStore store;
  auto measure = [&](int rank) {
    auto gpu = make_cuda_backend(rank);
    CommOptions options = comm_test::options_with(std::chrono::seconds(60));
    options.cuda_device = rank;
    NcclCommunicator comm(store, rank, world, options);
    for (int64_t n : {int64_t{64}, int64_t{1} << 16, int64_t{1} << 24}) {
      Tensor in = gpu->zeros({n * world}, DType::kBF16, MemoryCategory::kCommBuffers);
      Tensor shard = gpu->zeros({n}, DType::kBF16, MemoryCategory::kCommBuffers);
      comm.all_reduce(in);
      comm.reduce_scatter(in, shard);
      comm.all_gather(shard, in);
      comm.broadcast(in, 0);
    }
    comm.barrier();
    expect_runtime_within_reserve(*gpu, rank, world);
  };
  if (world == 1) return measure(0);
  auto other = std::async(std::launch::async, [&] { measure(1); });
  measure(0);
  other.get();
}

}  // namespace
}  // namespace mixtrain
