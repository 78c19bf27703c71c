// Why: the NCCL communicator cannot run on a machine without a GPU, but
// must be checked wherever one exists: the same collectives as the Gloo
// tests on CUDA tensors, one rank per device (two ranks as threads when
// there are two devices), with exact small-integer sums in every dtype and
// the ring's sent-element counts. Skips without a device.
#include "engine/comm/nccl/nccl_communicator.h"

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
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

}  // namespace
}  // namespace mixtrain
