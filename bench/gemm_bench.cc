// Why: the CPU backend's speed is its GEMMs, and the only fair yardstick
// for them is oneDNN itself. For the GEMM shapes of the example GPT (dim
// 384, B*T = 2048, vocab 256), forward and backward, and for 2048^3, this
// times Backend::matmul next to a raw oneDNN matmul primitive (created once,
// executed directly, no mixtrain code) with the same shapes, layouts and
// dtypes, interleaved in one process, best of several rounds. Where oneDNN
// has no optimized kernel for a dtype on this CPU (bf16 without
// AVX512-BF16/AMX, fp16 on oneDNN 2.6), the raw column is fp32 and says so;
// the ratio is then the price of staging the operands in fp32.
//
//   gemm_bench [--rounds N] [--min-seconds S] [--filter TEXT] [--json]
//   (--filter keeps the rows whose "shape dtype", e.g. "fc fwd bf16",
//   contains TEXT)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/common/cpu_features.h"
#ifdef MIXTRAIN_WITH_DNNL
#include <dnnl.hpp>
#endif

namespace mixtrain {
namespace {

// C (m,n) = op(A) op(B), op(A) (m,k), op(B) (k,n).
struct GemmShape {
  const char* name;
  int64_t m, n, k;
  bool trans_a, trans_b;
};

// The example GPT's linear layers as llm.c lays them out: weights W (OC,C),
// forward out = x W^T, backward dx = dout W and dW = dout^T x.
constexpr int64_t kRows = 2048, kDim = 384, kVocab = 256;
const GemmShape kShapes[] = {
    {"qkv fwd", kRows, 3 * kDim, kDim, false, true},
    {"attn proj fwd", kRows, kDim, kDim, false, true},
    {"fc fwd", kRows, 4 * kDim, kDim, false, true},
    {"fc proj fwd", kRows, kDim, 4 * kDim, false, true},
    {"lm head fwd", kRows, kVocab, kDim, false, true},
    {"fc dX", kRows, kDim, 4 * kDim, false, false},
    {"fc dW", 4 * kDim, kDim, kRows, true, false},
    {"fc proj dX", kRows, 4 * kDim, kDim, false, false},
    {"fc proj dW", kDim, 4 * kDim, kRows, true, false},
    {"qkv dW", 3 * kDim, kDim, kRows, true, false},
    {"square 2048", 2048, 2048, 2048, false, false},
};

struct Options {
  int rounds = 7;
  double min_seconds = 0.05;  // per timed batch of calls
  std::string filter;
  bool json = false;
};

// Seconds per call of `fn`: the best over `rounds` batches, each batch as
// many calls as fill min_seconds. `other` runs one batch between ours, so
// both sides see the same machine state.
struct Timer {
  const Options& options;
  int calls_per_batch(const std::function<void()>& fn) const {
    fn();  // warm up: caches, primitive creation, page faults
    const auto start = std::chrono::steady_clock::now();
    fn();
    const double one =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return std::max(1, static_cast<int>(options.min_seconds / std::max(one, 1e-9)));
  }
  static double batch(const std::function<void()>& fn, int calls) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls;
  }
  // Best seconds per call of a and of b, timed alternately.
  std::pair<double, double> interleaved(const std::function<void()>& a,
                                        const std::function<void()>& b) const {
    const int calls_a = calls_per_batch(a), calls_b = b ? calls_per_batch(b) : 0;
    double best_a = 1e30, best_b = 1e30;
    for (int r = 0; r < options.rounds; ++r) {
      best_a = std::min(best_a, batch(a, calls_a));
      if (b) best_b = std::min(best_b, batch(b, calls_b));
    }
    return {best_a, b ? best_b : 0.0};
  }
};

#ifdef MIXTRAIN_WITH_DNNL
// A oneDNN matmul primitive for one shape, made once and executed directly.
class RawOnednnMatmul {
 public:
  // Empty (ok() false) when oneDNN has only its reference kernel for `dtype`.
  RawOnednnMatmul(const GemmShape& s, dnnl::memory::data_type dtype)
      : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
    using dnnl::memory;
    const memory::desc a_md({s.m, s.k}, dtype,
                            s.trans_a ? memory::dims{1, s.m} : memory::dims{s.k, 1});
    const memory::desc b_md({s.k, s.n}, dtype,
                            s.trans_b ? memory::dims{1, s.k} : memory::dims{s.n, 1});
    const memory::desc c_md({s.m, s.n}, dtype, memory::dims{s.n, 1});
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), engine_, true);
    if (!pd || std::string_view(pd.impl_info_str()).starts_with("ref")) return;
    impl_ = pd.impl_info_str();
    primitive_ = dnnl::matmul(pd);
    a_ = memory(a_md, engine_);
    b_ = memory(b_md, engine_);
    c_ = memory(c_md, engine_);
    for (const memory* m : {&a_, &b_}) {  // small values, valid in every dtype
      std::memset(m->get_data_handle(), 0x3c, m->get_desc().get_size());
    }
  }
  bool ok() const { return static_cast<bool>(primitive_); }
  const std::string& impl() const { return impl_; }
  void run() {
    primitive_.execute(stream_, {{DNNL_ARG_SRC, a_}, {DNNL_ARG_WEIGHTS, b_}, {DNNL_ARG_DST, c_}});
    stream_.wait();
  }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::matmul primitive_;
  dnnl::memory a_, b_, c_;
  std::string impl_;
};

dnnl::memory::data_type onednn_type(DType t) {
  return t == DType::kF32    ? dnnl::memory::data_type::f32
         : t == DType::kBF16 ? dnnl::memory::data_type::bf16
                             : dnnl::memory::data_type::f16;
}
#endif

struct Row {
  std::string shape;
  int64_t m, n, k;
  std::string dtype;
  double ours_gflops;
  double raw_gflops;  // 0 when there is no raw oneDNN
  std::string raw_dtype;
  std::string raw_impl;
};

Row measure(Backend& backend, const GemmShape& s, DType dtype, const Timer& timer) {
  auto random_tensor = [&](Shape shape) {
    Tensor t = backend.empty(shape, dtype, MemoryCategory::kActivations);
    std::vector<float> host(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 17) / 17.0f - 0.5f;
    dispatch_float(dtype, "bench", [&](auto tag) {
      using T = decltype(tag);
      std::vector<T> stored(host.size());
      for (size_t i = 0; i < host.size(); ++i) stored[i] = from_float<T>(host[i]);
      backend.copy_from_host(t, stored.data());
    });
    return t;
  };
  Tensor a = random_tensor(s.trans_a ? Shape{s.k, s.m} : Shape{s.m, s.k});
  Tensor b = random_tensor(s.trans_b ? Shape{s.n, s.k} : Shape{s.k, s.n});
  Tensor c = backend.empty({s.m, s.n}, dtype, MemoryCategory::kActivations);
  MatmulOptions options;
  options.trans_a = s.trans_a;
  options.trans_b = s.trans_b;
  std::function<void()> ours = [&] { backend.matmul(c, a, b, options); };

  Row row{s.name, s.m, s.n, s.k, dtype_name(dtype), 0, 0, "-", "-"};
  std::function<void()> raw;
#ifdef MIXTRAIN_WITH_DNNL
  RawOnednnMatmul raw_same(s, onednn_type(dtype));
  RawOnednnMatmul raw_f32(s, dnnl::memory::data_type::f32);
  RawOnednnMatmul& raw_used = raw_same.ok() ? raw_same : raw_f32;
  if (raw_used.ok()) {
    raw = [&] { raw_used.run(); };
    row.raw_dtype = raw_same.ok() ? dtype_name(dtype) : "fp32";
    row.raw_impl = raw_used.impl();
  }
#endif
  const auto [ours_s, raw_s] = timer.interleaved(ours, raw);
  const double flops =
      2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
  row.ours_gflops = flops / ours_s * 1e-9;
  row.raw_gflops = raw ? flops / raw_s * 1e-9 : 0.0;
  return row;
}

void print_table(const std::vector<Row>& rows) {
  std::printf("%-14s %5s %5s %5s  %-5s %10s %10s  %-5s %-14s %7s\n", "shape", "M", "N", "K",
              "dtype", "ours GF/s", "raw GF/s", "raw", "raw impl", "ratio");
  for (const Row& r : rows) {
    std::printf("%-14s %5lld %5lld %5lld  %-5s %10.1f ", r.shape.c_str(),
                static_cast<long long>(r.m), static_cast<long long>(r.n),
                static_cast<long long>(r.k), r.dtype.c_str(), r.ours_gflops);
    if (r.raw_gflops > 0) {
      std::printf("%10.1f  %-5s %-14s %7.3f\n", r.raw_gflops, r.raw_dtype.c_str(),
                  r.raw_impl.c_str(), r.ours_gflops / r.raw_gflops);
    } else {
      std::printf("%10s  %-5s %-14s %7s\n", "n/a", "-", "-", "-");
    }
  }
}

void print_json(const std::vector<Row>& rows) {
  std::printf("[\n");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::printf(
        "  {\"shape\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"dtype\": \"%s\", "
        "\"ours_gflops\": %.2f, \"raw_gflops\": %.2f, \"raw_dtype\": \"%s\", "
        "\"raw_impl\": \"%s\", \"ratio\": %.4f}%s\n",
        r.shape.c_str(), static_cast<long long>(r.m), static_cast<long long>(r.n),
        static_cast<long long>(r.k), r.dtype.c_str(), r.ours_gflops, r.raw_gflops,
        r.raw_dtype.c_str(), r.raw_impl.c_str(),
        r.raw_gflops > 0 ? r.ours_gflops / r.raw_gflops : 0.0, i + 1 < rows.size() ? "," : "");
  }
  std::printf("]\n");
}

int run(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--json") {
      options.json = true;
    } else if (arg == "--rounds" && i + 1 < argc) {
      options.rounds = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--min-seconds" && i + 1 < argc) {
      options.min_seconds = std::atof(argv[++i]);
    } else if (arg == "--filter" && i + 1 < argc) {
      options.filter = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--rounds N] [--min-seconds S] [--filter TEXT] [--json]\n",
                   argv[0]);
      return 2;
    }
  }
  auto backend = make_backend("cpu");
  const Timer timer{options};
  std::vector<Row> rows;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (const GemmShape& shape : kShapes) {
      const std::string label = std::string(shape.name) + " " + dtype_name(dtype);
      if (label.find(options.filter) == std::string::npos) continue;
      rows.push_back(measure(*backend, shape, dtype, timer));
    }
  }
  if (options.json) {
    print_json(rows);
  } else {
    std::printf("cpu: %s; %d OpenMP threads; best of %d rounds, interleaved\n",
                cpu_features().describe().c_str(), omp_get_max_threads(), options.rounds);
    print_table(rows);
  }
  return 0;
}

}  // namespace
}  // namespace mixtrain

int main(int argc, char** argv) { return mixtrain::run(argc, argv); }
