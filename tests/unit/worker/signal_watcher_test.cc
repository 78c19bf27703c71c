// Why: issue 29's heap corruption, reproduced without the service. The
// process takes SIGUSR1 thousands of times while fp32 GEMMs run on
// oneDNN's AVX2 JIT kernels (CMake runs it with MIXTRAIN_MAX_CPU_ISA=avx2,
// the path a bf16 product takes on a CPU without AVX512-BF16). Handled on
// a GEMM thread, such a signal writes its frame wherever the kernel moved
// rsp, into the heap: the process aborts ("corrupted size vs. prev_size")
// or data changes. Watched by watch_signal, it only sets the flag. Its own
// process: the signal must be blocked before any other thread starts.
#include "worker/signal_watcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <array>
#include <random>
#include <thread>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/common/cpu_features.h"

namespace mixtrain::worker {
namespace {

// One linear layer's forward, y = x·Wᵀ + b, as the GPT runs it (oneDNN
// 2.x takes products with a bias to its older JIT kernels, the ones that
// move rsp), with its inputs and the product they must give.
struct Product {
  Tensor x, weight, bias, y;
  std::vector<float> inputs;    // x, weight and bias as set
  std::vector<float> expected;  // y
};

std::vector<float> host_copy(Backend& backend, const std::vector<const Tensor*>& tensors) {
  std::vector<float> out;
  for (const Tensor* t : tensors) {
    std::vector<float> part(static_cast<size_t>(t->numel()));
    backend.copy_to_host(part.data(), *t);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

void run(Backend& backend, Product& p) {
  backend.matmul(p.y, p.x, p.weight, MatmulOptions{.trans_b = true, .bias = &p.bias});
}

TEST(SignalWatcher, SignalsDuringGemmsCorruptNothing) {
  std::atomic<bool> received{false};
  watch_signal(SIGUSR1, &received);  // before any other thread
  ASSERT_EQ(max_cpu_isa(), CpuIsa::kAvx2) << "run with MIXTRAIN_MAX_CPU_ISA=avx2";

  std::unique_ptr<Backend> backend = make_backend("cpu");
  std::mt19937 random(29);
  std::normal_distribution<float> normal;
  std::vector<Product> products;
  // (rows, in, out) of a small GPT's layers: qkv, projection, MLP up and down.
  for (const auto [m, k, n] :
       {std::array<int64_t, 3>{512, 128, 384}, {512, 128, 128}, {512, 128, 512}, {512, 512, 128}}) {
    Product& p = products.emplace_back();
    p.x = backend->empty({m, k}, DType::kF32, MemoryCategory::kActivations);
    p.weight = backend->empty({n, k}, DType::kF32, MemoryCategory::kParams);
    p.bias = backend->empty({n}, DType::kF32, MemoryCategory::kParams);
    p.y = backend->empty({m, n}, DType::kF32, MemoryCategory::kActivations);
    for (const Tensor* t : {&p.x, &p.weight, &p.bias}) {
      std::vector<float> values(static_cast<size_t>(t->numel()));
      for (float& v : values) v = normal(random);
      backend->copy_from_host(*t, values.data());
    }
    p.inputs = host_copy(*backend, {&p.x, &p.weight, &p.bias});
    run(*backend, p);
    p.expected = host_copy(*backend, {&p.y});
  }

  std::atomic<bool> done{false};
  int sent = 0;
  std::thread sender([&] {
    while (!done.load()) {
      ::kill(::getpid(), SIGUSR1);
      ++sent;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  int runs = 0, changed = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (std::chrono::steady_clock::now() < end) {
    for (Product& p : products) {
      run(*backend, p);
      changed += host_copy(*backend, {&p.y}) != p.expected;
      changed += host_copy(*backend, {&p.x, &p.weight, &p.bias}) != p.inputs;
      ++runs;
    }
  }
  done = true;
  sender.join();
  std::cout << runs << " products, " << sent << " signals sent\n";
  EXPECT_TRUE(received.load());
  EXPECT_GT(runs, 40);
  EXPECT_EQ(changed, 0) << "outputs or inputs changed in " << runs << " products";
}

}  // namespace
}  // namespace mixtrain::worker
