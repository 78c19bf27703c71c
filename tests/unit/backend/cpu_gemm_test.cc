// Why: every layer of the model is a GEMM, so Backend::matmul is checked
// against a plain double-precision product for every dtype combination,
// transpose, batching, bias, alpha/beta and odd size, through the backend
// (oneDNN where it is built in) and through the portable kernel directly
// (so it is covered in every build); the linear layer's gradients composed
// from matmul and bias_backward are checked against finite differences.
//
// The reference is computed from the values the input tensors really hold
// (already rounded to their dtype), so input rounding is not an error here;
// what remains is fp32 accumulation and the one rounding of the output:
//
//   C dtype | tolerance, relative to max|reference| | why
//   --------+----------------------------------------+---------------------------
//   fp32    | 1e-5                                   | fp32 sums over K <= 600:
//           |                                        | ~sqrt(K)·6e-8, with headroom
//           |                                        | for oneDNN's own K blocking
//   fp16    | 1e-3                                   | one rounding to 11 bits
//           |                                        | (2^-12 relative) + the above
//   bf16    | 1e-2                                   | one rounding to 8 bits
//           |                                        | (2^-9 relative) + the above
//
// Against unrounded fp32 inputs bf16 operands would add ~2^-9·sqrt(K)
// relative error of the output scale (~1e-2) and fp16 ones ~2^-12·sqrt(K)
// (~1e-3); rounding the inputs first keeps these tests sharp instead.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_gemm_portable.h"
#include "backend_test_util.h"

namespace mixtrain::backend_test {
namespace {

// The table at the top, by C's dtype.
double gemm_tolerance(DType c_type) {
  switch (c_type) {
    case DType::kF32:
      return 1e-5;
    case DType::kF16:
      return 1e-3;
    default:
      return 1e-2;
  }
}

// Which implementation runs the product.
enum class Path { kBackend, kPortable };

struct Case {
  DType ab = DType::kF32;
  DType c = DType::kF32;
  int64_t batch = 0;  // 0: 2-D tensors; otherwise 3-D with this batch
  int64_t m = 1, n = 1, k = 1;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false;
  DType bias_type = DType::kF32;

  std::string describe() const {
    return std::string(dtype_name(ab)) + "->" + dtype_name(c) + " batch " + std::to_string(batch) +
           " m " + std::to_string(m) + " n " + std::to_string(n) + " k " + std::to_string(k) +
           (trans_a ? " A^T" : "") + (trans_b ? " B^T" : "") + " alpha " + std::to_string(alpha) +
           " beta " + std::to_string(beta) +
           (bias ? std::string(" bias ") + dtype_name(bias_type) : "");
  }
  Shape shape(int64_t rows, int64_t cols) const {
    return batch > 0 ? Shape{batch, rows, cols} : Shape{rows, cols};
  }
};

// alpha op(A) op(B) + beta C0 + bias in double.
std::vector<double> reference(const Case& cs, const std::vector<double>& a,
                              const std::vector<double>& b, const std::vector<double>& c0,
                              const std::vector<double>& bias) {
  const int64_t batches = std::max<int64_t>(cs.batch, 1);
  std::vector<double> c(static_cast<size_t>(batches * cs.m * cs.n));
  for (int64_t bi = 0; bi < batches; ++bi) {
    for (int64_t i = 0; i < cs.m; ++i) {
      for (int64_t j = 0; j < cs.n; ++j) {
        double sum = 0.0;
        for (int64_t p = 0; p < cs.k; ++p) {
          const double av =
              cs.trans_a ? a[(bi * cs.k + p) * cs.m + i] : a[(bi * cs.m + i) * cs.k + p];
          const double bv =
              cs.trans_b ? b[(bi * cs.n + j) * cs.k + p] : b[(bi * cs.k + p) * cs.n + j];
          sum += av * bv;
        }
        const size_t index = static_cast<size_t>((bi * cs.m + i) * cs.n + j);
        double value = cs.alpha * sum;
        if (cs.beta != 0.0f) value += cs.beta * c0[index];
        if (cs.bias) value += bias[static_cast<size_t>(j)];
        c[index] = value;
      }
    }
  }
  return c;
}

void run_portable(const Case& cs, const Tensor& c, const Tensor& a, const Tensor& b,
                  const Tensor* bias) {
  GemmSpec spec;
  spec.batch = std::max<int64_t>(cs.batch, 1);
  spec.batched = cs.batch > 0;
  spec.m = cs.m;
  spec.n = cs.n;
  spec.k = cs.k;
  spec.trans_a = cs.trans_a;
  spec.trans_b = cs.trans_b;
  spec.ab_type = cs.ab;
  spec.c_type = cs.c;
  spec.has_bias = cs.bias;
  spec.bias_type = cs.bias_type;
  spec.alpha = cs.alpha;
  spec.beta = cs.beta;
  const int threads = omp_get_max_threads();
  std::vector<float> workspace(portable_gemm_workspace_floats(spec, threads));
  portable_gemm(spec, {a.data(), b.data(), c.data(), bias ? bias->data() : nullptr},
                workspace.data(), threads);
}

// Runs `cs` on random operands and compares with the double reference.
// C starts as NaN when beta is 0, so reading it would show.
void check_case(Backend& backend, const Case& cs, Path path, uint32_t seed) {
  SCOPED_TRACE(cs.describe() + (path == Path::kPortable ? " [portable]" : " [backend]"));
  const Shape a_shape = cs.trans_a ? cs.shape(cs.k, cs.m) : cs.shape(cs.m, cs.k);
  const Shape b_shape = cs.trans_b ? cs.shape(cs.n, cs.k) : cs.shape(cs.k, cs.n);
  const Shape c_shape = cs.shape(cs.m, cs.n);
  Tensor a = make_tensor(backend, a_shape, cs.ab, random_values(shape_numel(a_shape), seed));
  Tensor b = make_tensor(backend, b_shape, cs.ab, random_values(shape_numel(b_shape), seed + 1));
  std::vector<double> c_init(static_cast<size_t>(shape_numel(c_shape)),
                             std::numeric_limits<double>::quiet_NaN());
  if (cs.beta != 0.0f) c_init = random_values(c_init.size(), seed + 2);
  Tensor c = make_tensor(backend, c_shape, cs.c, c_init);
  Tensor bias;
  std::vector<double> bias_values;
  if (cs.bias) {
    bias = make_tensor(backend, {cs.n}, cs.bias_type,
                       random_values(static_cast<size_t>(cs.n), seed + 3));
    bias_values = values_of(backend, bias);
  }
  const std::vector<double> expected = reference(cs, values_of(backend, a), values_of(backend, b),
                                                 values_of(backend, c), bias_values);
  if (path == Path::kBackend) {
    MatmulOptions options;
    options.trans_a = cs.trans_a;
    options.trans_b = cs.trans_b;
    options.alpha = cs.alpha;
    options.beta = cs.beta;
    options.bias = cs.bias ? &bias : nullptr;
    backend.matmul(c, a, b, options);
  } else {
    run_portable(cs, c, a, b, cs.bias ? &bias : nullptr);
  }
  EXPECT_TRUE(
      max_error_within(values_of(backend, c), expected, gemm_tolerance(cs.c) * max_abs(expected)));
}

class CpuMatmul : public ::testing::TestWithParam<Path> {
 protected:
  void check(const Case& cs) { check_case(*backend_, cs, GetParam(), seed_++); }

  std::unique_ptr<Backend> backend_ = make_backend("cpu");
  uint32_t seed_ = 1;
};

TEST_P(CpuMatmul, EveryDtypeCombinationAndTranspose) {
  for (DType ab : kFloatTypes) {
    for (DType c : kFloatTypes) {
      for (int transposes = 0; transposes < 4; ++transposes) {
        Case cs{.ab = ab, .c = c, .m = 33, .n = 7, .k = 130};
        cs.trans_a = transposes & 1;
        cs.trans_b = transposes & 2;
        check(cs);
      }
    }
  }
}

TEST_P(CpuMatmul, OddSizes) {
  for (DType ab : {DType::kF32, DType::kBF16}) {
    for (int64_t m : {1, 7, 33, 130}) {
      for (int64_t n : {1, 7, 33, 130}) {
        for (int64_t k : {1, 7, 33, 130}) {
          check({.ab = ab, .c = DType::kF32, .m = m, .n = n, .k = k, .trans_b = (m + k) % 2 == 0});
        }
      }
    }
  }
}

TEST_P(CpuMatmul, LargerThanOneCacheBlock) {
  check({.ab = DType::kF32, .c = DType::kF32, .m = 200, .n = 300, .k = 600});
  check({.ab = DType::kBF16, .c = DType::kBF16, .m = 200, .n = 300, .k = 600, .trans_a = true});
  check({.ab = DType::kF16, .c = DType::kF32, .m = 200, .n = 300, .k = 600, .trans_b = true});
}

TEST_P(CpuMatmul, BatchedWithTransposes) {
  for (DType t : kFloatTypes) {
    for (int transposes = 0; transposes < 4; ++transposes) {
      Case cs{.ab = t, .c = t, .batch = 3, .m = 7, .n = 33, .k = 20};
      cs.trans_a = transposes & 1;
      cs.trans_b = transposes & 2;
      check(cs);
    }
  }
  check({.ab = DType::kBF16, .c = DType::kF32, .batch = 1, .m = 5, .n = 6, .k = 7});
}

TEST_P(CpuMatmul, BiasInFp32OrTheOutputDtype) {
  for (DType t : kFloatTypes) {
    for (DType bias_type : {DType::kF32, t}) {
      for (float alpha : {1.0f, 0.5f}) {
        for (float beta : {0.0f, 1.0f}) {
          check({.ab = t,
                 .c = t,
                 .m = 9,
                 .n = 33,
                 .k = 17,
                 .alpha = alpha,
                 .beta = beta,
                 .bias = true,
                 .bias_type = bias_type});
        }
      }
    }
  }
  check({.ab = DType::kBF16,
         .c = DType::kF16,
         .batch = 2,
         .m = 4,
         .n = 5,
         .k = 6,
         .alpha = 2.0f,
         .bias = true,
         .bias_type = DType::kF16});
  check({.ab = DType::kF16, .c = DType::kF32, .m = 4, .n = 5, .k = 6, .bias = true});
}

TEST_P(CpuMatmul, AlphaAndBetaAccumulate) {
  for (DType c : kFloatTypes) {
    for (float beta : {1.0f, 0.5f, -1.0f}) {
      check({.ab = DType::kBF16, .c = c, .m = 33, .n = 7, .k = 7, .alpha = -2.0f, .beta = beta});
      check({.ab = DType::kF32,
             .c = c,
             .batch = 2,
             .m = 3,
             .n = 130,
             .k = 7,
             .trans_a = true,
             .beta = beta});
    }
  }
}

TEST_P(CpuMatmul, EmptyReductionLeavesBetaCPlusBias) {
  check({.ab = DType::kF32, .c = DType::kF32, .m = 3, .n = 4, .k = 0, .beta = 1.0f, .bias = true});
  check({.ab = DType::kBF16, .c = DType::kBF16, .m = 3, .n = 4, .k = 0});
}

INSTANTIATE_TEST_SUITE_P(Paths, CpuMatmul, ::testing::Values(Path::kBackend, Path::kPortable),
                         [](const auto& info) {
                           return info.param == Path::kBackend ? "Backend" : "Portable";
                         });

TEST(CpuMatmulWorkspace, StagingCopiesAreCountedAndFreed) {
  auto backend = make_backend("cpu");
  MemoryTracker& memory = backend->memory();
  Tensor a = make_tensor(*backend, {64, 32}, DType::kF16, random_values(64 * 32, 1));
  Tensor b = make_tensor(*backend, {32, 16}, DType::kF16, random_values(32 * 16, 2));
  Tensor c = backend->empty({64, 16}, DType::kF16, MemoryCategory::kActivations);
  memory.reset_peaks();
  backend->matmul(c, a, b, {});
  EXPECT_EQ(memory.current(MemoryPool::kDevice, MemoryCategory::kWorkspace), 0u);
  EXPECT_GT(memory.peak(MemoryPool::kDevice, MemoryCategory::kWorkspace), 0u);
#ifdef MIXTRAIN_WITH_DNNL
  // oneDNN has no fp16 matmul: A and B were staged in fp32.
  EXPECT_GE(memory.peak(MemoryPool::kDevice, MemoryCategory::kWorkspace),
            static_cast<size_t>(4 * (64 * 32 + 32 * 16)));
#endif
}

// The llm.c linear layer: out (M,OC) = inp (M,C) W^T + bias, W (OC,C).
// With loss L = sum(G * out): dinp = G W, dW = G^T inp, dbias = colsum G.
TEST(CpuMatmulGradients, LinearLayerMatchesFiniteDifferences) {
  auto backend = make_backend("cpu");
  const int64_t m = 6, c = 5, oc = 4;
  const std::vector<double> inp = random_values(m * c, 11), weight = random_values(oc * c, 12),
                            bias = random_values(oc, 13), g = random_values(m * oc, 14);

  auto loss = [&](const std::vector<double>& inp_v, const std::vector<double>& w_v,
                  const std::vector<double>& bias_v) {
    Tensor x = make_tensor(*backend, {m, c}, DType::kF32, inp_v);
    Tensor w = make_tensor(*backend, {oc, c}, DType::kF32, w_v);
    Tensor bb = make_tensor(*backend, {oc}, DType::kF32, bias_v);
    Tensor out = backend->empty({m, oc}, DType::kF32, MemoryCategory::kActivations);
    MatmulOptions options;
    options.trans_b = true;
    options.bias = &bb;
    backend->matmul(out, x, w, options);
    return dot(g, values_of(*backend, out));
  };
  // Central differences with step 1e-2 (every value is below 1); the loss
  // is linear in each variable, so only fp32 rounding of the forward
  // limits them.
  const double h = 1e-2;
  const std::vector<double> fd_inp = finite_differences(
      [&](const std::vector<double>& v) { return loss(v, weight, bias); }, inp, h);
  const std::vector<double> fd_w = finite_differences(
      [&](const std::vector<double>& v) { return loss(inp, v, bias); }, weight, h);
  const std::vector<double> fd_bias = finite_differences(
      [&](const std::vector<double>& v) { return loss(inp, weight, v); }, bias, h);

  // Analytic gradients, each added onto a nonzero starting value.
  const std::vector<double> start_inp = random_values(m * c, 21),
                            start_w = random_values(oc * c, 22), start_b = random_values(oc, 23);
  Tensor gt = make_tensor(*backend, {m, oc}, DType::kF32, g);
  Tensor x = make_tensor(*backend, {m, c}, DType::kF32, inp);
  Tensor w = make_tensor(*backend, {oc, c}, DType::kF32, weight);
  Tensor dinp = make_tensor(*backend, {m, c}, DType::kF32, start_inp);
  Tensor dw = make_tensor(*backend, {oc, c}, DType::kF32, start_w);
  Tensor dbias = make_tensor(*backend, {oc}, DType::kF32, start_b);
  MatmulOptions accumulate;
  accumulate.beta = 1.0f;
  backend->matmul(dinp, gt, w, accumulate);
  MatmulOptions accumulate_trans_a = accumulate;
  accumulate_trans_a.trans_a = true;
  backend->matmul(dw, gt, x, accumulate_trans_a);
  backend->bias_backward(dbias, gt);

  const double tol = 1e-3;
  const auto dinp_v = values_of(*backend, dinp), dw_v = values_of(*backend, dw),
             dbias_v = values_of(*backend, dbias);
  for (size_t i = 0; i < inp.size(); ++i) {
    EXPECT_NEAR(dinp_v[i] - start_inp[i], fd_inp[i], tol) << "dinp " << i;
  }
  for (size_t i = 0; i < weight.size(); ++i) {
    EXPECT_NEAR(dw_v[i] - start_w[i], fd_w[i], tol) << "dW " << i;
  }
  for (size_t i = 0; i < bias.size(); ++i) {
    EXPECT_NEAR(dbias_v[i] - start_b[i], fd_bias[i], tol) << "dbias " << i;
  }
}

TEST(CpuBiasBackward, AddsColumnSumsInEveryDtype) {
  auto backend = make_backend("cpu");
  const int64_t batch = 3, seq = 5, n = 130;
  for (DType dout_type : kFloatTypes) {
    for (DType dbias_type : kFloatTypes) {
      SCOPED_TRACE(std::string(dtype_name(dout_type)) + " -> " + dtype_name(dbias_type));
      Tensor dout =
          make_tensor(*backend, {batch, seq, n}, dout_type, random_values(batch * seq * n, 31));
      Tensor dbias = make_tensor(*backend, {n}, dbias_type, random_values(n, 32));
      const std::vector<double> d = values_of(*backend, dout);
      std::vector<double> expected = values_of(*backend, dbias);
      for (int64_t r = 0; r < batch * seq; ++r) {
        for (int64_t j = 0; j < n; ++j) expected[j] += d[r * n + j];
      }
      backend->bias_backward(dbias, dout);
      const std::vector<double> got = values_of(*backend, dbias);
      const double allowed = gemm_tolerance(dbias_type) * max_abs(expected);
      for (int64_t j = 0; j < n; ++j) EXPECT_NEAR(got[j], expected[j], allowed) << "column " << j;
    }
  }
}

TEST(CpuMatmulErrors, BadShapesAndDtypesThrowInvalidArgument) {
  auto backend = make_backend("cpu");
  auto t = [&](Shape shape, DType dtype = DType::kF32) {
    return backend->empty(shape, dtype, MemoryCategory::kActivations);
  };
  Tensor a = t({4, 3}), b = t({3, 5}), c = t({4, 5});
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->matmul(c, a, t({4, 5}), {});
      },
      {"matmul: inner dimensions"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->matmul(c, a, t({3, 5}, DType::kBF16), {});
      },
      {"share one dtype"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->matmul(t({5, 5}), a, b, {});
      },
      {"matmul: op(a)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->matmul(t({4, 6}), a, b, {});
      },
      {"matmul: op(b)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->matmul(c, t({4, 3}, DType::kI32), t({3, 5}, DType::kI32), {});
      },
      {"int32(4, 3)"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { backend->matmul(t({20}), a, b, {}); }, {"must be 2-D"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->matmul(t({2, 4, 5}), a, b, {});
      },
      {"must all be 2-D or all 3-D"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->matmul(t({2, 4, 5}), t({2, 4, 3}), t({3, 3, 5}), {});
      },
      {"batch sizes differ"}));
  EXPECT_TRUE(throws_invalid_argument([&] { backend->matmul(a, a, t({3, 3}), {}); }, {"overlaps"}));
  MatmulOptions with_gelu;
  with_gelu.gelu_out = &c;  // C keeps the pre-activation: not also the output
  EXPECT_TRUE(throws_invalid_argument([&] { backend->matmul(c, a, b, with_gelu); },
                                      {"gelu_out", "is C itself"}));
  Tensor wrong_gelu = t({5, 4});
  with_gelu.gelu_out = &wrong_gelu;
  EXPECT_TRUE(throws_invalid_argument([&] { backend->matmul(c, a, b, with_gelu); },
                                      {"gelu_out fp32(5, 4)"}));
  Tensor bias_grad = t({5});
  MatmulOptions with_bias_grad;
  with_bias_grad.bias_grad = &bias_grad;  // the bias gradient needs A, transposed, as dout
  EXPECT_TRUE(throws_invalid_argument([&] { backend->matmul(c, a, b, with_bias_grad); },
                                      {"bias_grad", "without trans_a"}));
  Tensor wrong_bias = t({4});
  MatmulOptions with_bias;
  with_bias.bias = &wrong_bias;
  EXPECT_TRUE(
      throws_invalid_argument([&] { backend->matmul(c, a, b, with_bias); }, {"bias fp32(4)"}));
  Tensor fp16_bias = t({5}, DType::kF16);
  with_bias.bias = &fp16_bias;
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->matmul(t({4, 5}, DType::kBF16), a, b, with_bias);
      },
      {"fp32 or c's dtype"}));
  EXPECT_TRUE(throws_invalid_argument([&] { backend->bias_backward(t({4}), c); },
                                      {"bias_backward: dbias fp32(4)"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { backend->bias_backward(t({5}, DType::kI32), c); }, {"int32"}));
}

}  // namespace
}  // namespace mixtrain::backend_test
