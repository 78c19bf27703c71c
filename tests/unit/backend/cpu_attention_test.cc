// Why: attention is the one layer whose CPU implementation reshuffles its
// input (heads split out for batched GEMMs) and hand-writes a masked
// softmax and its backward, so the forward is checked against a direct
// double-precision transcription of the definition in every dtype, and the
// backward against central finite differences of that same fp32 forward.
//
// Tolerances (relative to the largest |reference| of the tensor compared;
// references use the inputs as stored, so input rounding is no error):
//
//   dtypes | out / dqkv | att (absolute) | why
//   -------+------------+----------------+----------------------------------
//   fp32   | 1e-5       | 1e-6           | fp32 GEMMs and softmax
//   fp16   | 5e-3       | 1e-3           | att rounded to 11 bits (2^-12),
//          |            |                | then out/dqkv rounded once more
//   bf16   | 4e-2       | 8e-3           | the same at 8 bits (2^-9): P and
//          |            |                | dS enter GEMMs as bf16 operands
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "backend_test_util.h"

namespace mixtrain::backend_test {
namespace {

struct Dims {
  int64_t batch, seq, channels, heads;
  int64_t head_size() const { return channels / heads; }
};

double out_tolerance(DType t) { return t == DType::kF32 ? 1e-5 : t == DType::kF16 ? 5e-3 : 4e-2; }
double att_tolerance(DType t) { return t == DType::kF32 ? 1e-6 : t == DType::kF16 ? 1e-3 : 8e-3; }

// The definition, in double: returns out (B,T,C) and fills att (B,NH,T,T).
std::vector<double> reference_attention(const Dims& d, const std::vector<double>& qkv,
                                        std::vector<double>& att) {
  const int64_t hs = d.head_size(), c3 = 3 * d.channels;
  std::vector<double> out(static_cast<size_t>(d.batch * d.seq * d.channels), 0.0);
  att.assign(static_cast<size_t>(d.batch * d.heads * d.seq * d.seq), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      for (int64_t t = 0; t < d.seq; ++t) {
        const double* q = &qkv[(b * d.seq + t) * c3 + h * hs];
        double* p = &att[((b * d.heads + h) * d.seq + t) * d.seq];
        double max_score = -1e300;
        for (int64_t s = 0; s <= t; ++s) {
          const double* k = &qkv[(b * d.seq + s) * c3 + d.channels + h * hs];
          double dot = 0.0;
          for (int64_t i = 0; i < hs; ++i) dot += q[i] * k[i];
          p[s] = dot * scale;
          max_score = std::max(max_score, p[s]);
        }
        double sum = 0.0;
        for (int64_t s = 0; s <= t; ++s) sum += p[s] = std::exp(p[s] - max_score);
        for (int64_t s = 0; s <= t; ++s) p[s] /= sum;
        double* y = &out[(b * d.seq + t) * d.channels + h * hs];
        for (int64_t s = 0; s <= t; ++s) {
          const double* v = &qkv[(b * d.seq + s) * c3 + 2 * d.channels + h * hs];
          for (int64_t i = 0; i < hs; ++i) y[i] += p[s] * v[i];
        }
      }
    }
  }
  return out;
}

struct DtypeCase {
  DType qkv, out, att;
};

TEST(CpuAttention, ForwardMatchesDoubleReference) {
  auto backend = make_backend("cpu");
  const DtypeCase cases[] = {{DType::kF32, DType::kF32, DType::kF32},
                             {DType::kBF16, DType::kBF16, DType::kBF16},
                             {DType::kF16, DType::kF16, DType::kF16},
                             {DType::kBF16, DType::kF16, DType::kF32},
                             {DType::kF32, DType::kBF16, DType::kF16}};
  for (const Dims& d : {Dims{2, 7, 12, 3}, Dims{1, 33, 16, 2}, Dims{2, 1, 8, 8}}) {
    for (const DtypeCase& dc : cases) {
      SCOPED_TRACE(std::string("qkv ") + dtype_name(dc.qkv) + " out " + dtype_name(dc.out) +
                   " att " + dtype_name(dc.att) + " T " + std::to_string(d.seq));
      Tensor qkv = make_tensor(*backend, {d.batch, d.seq, 3 * d.channels}, dc.qkv,
                               random_values(d.batch * d.seq * 3 * d.channels, 7, -2.0f, 2.0f));
      Tensor out =
          backend->empty({d.batch, d.seq, d.channels}, dc.out, MemoryCategory::kActivations);
      Tensor att =
          backend->empty({d.batch, d.heads, d.seq, d.seq}, dc.att, MemoryCategory::kActivations);
      backend->attention_forward(out, att, qkv, static_cast<int>(d.heads));

      std::vector<double> expected_att;
      const std::vector<double> expected_out =
          reference_attention(d, values_of(*backend, qkv), expected_att);
      const DType coarsest =
          dc.out == DType::kBF16 || dc.att == DType::kBF16 || dc.qkv == DType::kBF16
              ? DType::kBF16
              : (dc.out == DType::kF16 || dc.att == DType::kF16 ? DType::kF16 : DType::kF32);
      EXPECT_TRUE(max_error_within(values_of(*backend, att), expected_att, att_tolerance(dc.att)))
          << "att";
      EXPECT_TRUE(max_error_within(values_of(*backend, out), expected_out,
                                   out_tolerance(coarsest) * max_abs(expected_out)))
          << "out";
    }
  }
}

// loss = sum(w * out) for fixed random w, so dout = w.
TEST(CpuAttention, BackwardMatchesFiniteDifferences) {
  auto backend = make_backend("cpu");
  const Dims d{2, 5, 8, 2};
  const Shape qkv_shape = {d.batch, d.seq, 3 * d.channels};
  const Shape out_shape = {d.batch, d.seq, d.channels};
  const Shape att_shape = {d.batch, d.heads, d.seq, d.seq};
  std::vector<double> qkv_values = random_values(shape_numel(qkv_shape), 41);
  const std::vector<double> w = random_values(shape_numel(out_shape), 42);

  auto loss = [&] {
    Tensor qkv = make_tensor(*backend, qkv_shape, DType::kF32, qkv_values);
    Tensor out = backend->empty(out_shape, DType::kF32, MemoryCategory::kActivations);
    Tensor att = backend->empty(att_shape, DType::kF32, MemoryCategory::kActivations);
    backend->attention_forward(out, att, qkv, static_cast<int>(d.heads));
    return dot(w, values_of(*backend, out));
  };

  Tensor qkv = make_tensor(*backend, qkv_shape, DType::kF32, qkv_values);
  Tensor out = backend->empty(out_shape, DType::kF32, MemoryCategory::kActivations);
  Tensor att = backend->empty(att_shape, DType::kF32, MemoryCategory::kActivations);
  backend->attention_forward(out, att, qkv, static_cast<int>(d.heads));
  const std::vector<double> start = random_values(qkv_values.size(), 43);
  Tensor dqkv = make_tensor(*backend, qkv_shape, DType::kF32, start);
  Tensor dout = make_tensor(*backend, out_shape, DType::kF32, w);
  backend->attention_backward(dqkv, dout, qkv, att, static_cast<int>(d.heads));
  const std::vector<double> grad = values_of(*backend, dqkv);

  // eps balances truncation (O(eps^2) on O(1) curvature) against fp32
  // rounding of the loss (~1e-7 * 40 terms / eps).
  // Every third element: columns 0, 3, ..., 21 of every (b, t) row, which
  // hit q, k and v of both heads at several offsets within a head.
  const double eps = 1e-2;
  for (size_t i = 0; i < qkv_values.size(); i += 3) {
    const double saved = qkv_values[i];
    qkv_values[i] = saved + eps;
    const double plus = loss();
    qkv_values[i] = saved - eps;
    const double minus = loss();
    qkv_values[i] = saved;
    EXPECT_NEAR(grad[i] - start[i], (plus - minus) / (2.0 * eps), 2e-3) << "dqkv " << i;
  }
}

// The 16-bit backward against the fp32 backward of the same stored inputs.
TEST(CpuAttention, BackwardIn16BitMatchesFp32) {
  auto backend = make_backend("cpu");
  const Dims d{2, 9, 12, 3};
  const Shape qkv_shape = {d.batch, d.seq, 3 * d.channels};
  const Shape out_shape = {d.batch, d.seq, d.channels};
  const Shape att_shape = {d.batch, d.heads, d.seq, d.seq};
  const std::vector<double> qkv_values = random_values(shape_numel(qkv_shape), 51, -2.0f, 2.0f);
  const std::vector<double> dout_values = random_values(shape_numel(out_shape), 52);

  auto gradient = [&](DType dtype, DType compute) {
    // Inputs rounded to `dtype`, then computed in `compute`.
    const std::vector<double> stored_qkv =
        values_of(*backend, make_tensor(*backend, qkv_shape, dtype, qkv_values));
    const std::vector<double> stored_dout =
        values_of(*backend, make_tensor(*backend, out_shape, dtype, dout_values));
    Tensor qkv = make_tensor(*backend, qkv_shape, compute, stored_qkv);
    Tensor dout = make_tensor(*backend, out_shape, compute, stored_dout);
    Tensor out = backend->empty(out_shape, compute, MemoryCategory::kActivations);
    Tensor att = backend->empty(att_shape, compute, MemoryCategory::kActivations);
    Tensor dqkv = backend->zeros(qkv_shape, DType::kF32, MemoryCategory::kActivations);
    backend->attention_forward(out, att, qkv, static_cast<int>(d.heads));
    backend->attention_backward(dqkv, dout, qkv, att, static_cast<int>(d.heads));
    return values_of(*backend, dqkv);
  };
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<double> expected = gradient(dtype, DType::kF32);
    EXPECT_TRUE(max_error_within(gradient(dtype, dtype), expected,
                                 out_tolerance(dtype) * max_abs(expected)))
        << "dqkv";
  }
}

TEST(CpuAttention, BadShapesThrowInvalidArgument) {
  auto backend = make_backend("cpu");
  auto t = [&](Shape shape, DType dtype = DType::kF32) {
    return backend->empty(shape, dtype, MemoryCategory::kActivations);
  };
  Tensor qkv = t({2, 4, 24}), out = t({2, 4, 8}), att = t({2, 2, 4, 4});
  EXPECT_TRUE(throws_invalid_argument([&] { backend->attention_forward(out, att, qkv, 3); },
                                      {"attention_forward: n_head 3"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->attention_forward(out, att, t({2, 4, 25}), 2);
      },
      {"qkv fp32(2, 4, 25)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->attention_forward(t({2, 4, 9}), att, qkv, 2);
      },
      {"out fp32(2, 4, 9)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->attention_forward(out, t({2, 2, 4, 5}), qkv, 2);
      },
      {"att fp32(2, 2, 4, 5)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->attention_forward(out, att, t({2, 4, 24}, DType::kI32), 2);
      },
      {"int32"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->attention_backward(t({2, 4, 21}), out, qkv, att, 2);
      },
      {"attention_backward: dqkv"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->attention_backward(t({2, 4, 24}), t({2, 3, 8}), qkv, att, 2);
      },
      {"attention_backward: dout"}));
}

}  // namespace
}  // namespace mixtrain::backend_test
