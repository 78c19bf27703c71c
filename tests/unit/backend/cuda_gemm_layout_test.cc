// Why: gemm_row_major (cuda_gemm.cc) turns the engine's row-major GEMMs
// into column-major cuBLAS calls by swapping operands; a wrong leading
// dimension, batch stride or transpose there gives wrong numbers only on a
// GPU. This checks the mapping on the host: cuBLAS is the emulation's
// reference cublasGemmStridedBatchedEx (tests/cuda_emulation/cublas_stub.cc,
// which also refuses what cuBLAS documents as invalid), and matmul's and
// attention's operand expressions are compared with naive row-major math.
// No kernels run; the expressions below follow cuda_matmul.cu and
// cuda_attention.cu and must be kept in step with them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/backend/cuda/cuda_gemm.h"
#include "backend_test_util.h"

namespace mixtrain::gpu {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  const std::vector<double> values = backend_test::random_values(n, seed);
  return {values.begin(), values.end()};
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_TRUE(backend_test::max_error_within({got.begin(), got.end()}, {want.begin(), want.end()},
                                             1e-4));
}

class CudaGemmLayout : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cublasCreate(&blas_.handle), CUBLAS_STATUS_SUCCESS); }
  void TearDown() override { cublasDestroy(blas_.handle); }
  Blas blas_{nullptr};
};

TEST_F(CudaGemmLayout, MatmulEveryLayoutBatched) {
  const int64_t batch = 3, m = 13, k = 37, n = 19;
  for (int layout = 0; layout < 4; ++layout) {
    const bool trans_a = layout & 1, trans_b = layout & 2;
    SCOPED_TRACE(::testing::Message() << "trans_a " << trans_a << " trans_b " << trans_b);
    const auto a = random_floats(batch * m * k, 1 + layout), b = random_floats(batch * k * n, 11);
    auto c = random_floats(batch * m * n, 21);
    // A is (m,k) or, transposed, (k,m); B is (k,n) or (n,k); all row-major.
    const int64_t a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
    std::vector<float> want = c;
    for (int64_t p = 0; p < batch; ++p)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t l = 0; l < k; ++l) {
            const float x = a[p * m * k + (trans_a ? l * a_cols + i : i * a_cols + l)];
            const float y = b[p * k * n + (trans_b ? j * b_cols + l : l * b_cols + j)];
            sum += static_cast<double>(x) * y;
          }
          float& w = want[p * m * n + i * n + j];
          w = 0.75f * static_cast<float>(sum) + 0.5f * w;
        }
    // cuda_matmul.cu's operands: ld = the stored row length, stride = one matrix.
    const GemmOperand a_op{a.data(), DType::kF32, a_cols, m * k, trans_a};
    const GemmOperand b_op{b.data(), DType::kF32, b_cols, k * n, trans_b};
    gemm_row_major(blas_, m, n, k, a_op, b_op, {c.data(), DType::kF32, n, m * n}, batch, 0.75f,
                   0.5f);
    expect_near(c, want);
  }
}

// Attention's GEMMs read q, k and v in place from qkv (B,T,3C): head h of
// batch row b is a (T,HS) matrix with row stride 3C, heads HS apart.
class CudaGemmAttentionLayout : public CudaGemmLayout {
 protected:
  static constexpr int64_t B = 2, T = 7, NH = 3, HS = 4, C = NH * HS;

  float qkv_at(int64_t b, int64_t t, int part, int64_t h, int64_t d) const {
    return qkv_[(b * T + t) * 3 * C + part * C + h * HS + d];
  }
  const float* qkv_part(int64_t b, int part) const { return qkv_.data() + b * T * 3 * C + part * C; }
  float* dqkv_part(int64_t b, int part) { return dqkv_.data() + b * T * 3 * C + part * C; }
  // Element (b, h, i, j) of a (B,NH,T,T) tensor.
  static int64_t score(int64_t b, int64_t h, int64_t i, int64_t j) {
    return ((b * NH + h) * T + i) * T + j;
  }

  std::vector<float> qkv_ = random_floats(B * T * 3 * C, 31);
  std::vector<float> dqkv_ = random_floats(B * T * 3 * C, 32);
};

TEST_F(CudaGemmAttentionLayout, ForwardScoresAndOutput) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  std::vector<float> preatt(B * NH * T * T), want_preatt(preatt.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          double sum = 0;
          for (int64_t d = 0; d < HS; ++d) sum += double(qkv_at(b, i, 0, h, d)) * qkv_at(b, j, 1, h, d);
          want_preatt[score(b, h, i, j)] = scale * static_cast<float>(sum);
        }
  // preatt[b,h] = scale * q k^T.
  for (int64_t b = 0; b < B; ++b) {
    gemm_row_major(blas_, T, T, HS, {qkv_part(b, 0), DType::kF32, 3 * C, HS, false},
                   {qkv_part(b, 1), DType::kF32, 3 * C, HS, true},
                   {preatt.data() + b * NH * T * T, DType::kF32, T, T * T}, NH, scale, 0.0f);
  }
  expect_near(preatt, want_preatt);

  const std::vector<float> att = random_floats(B * NH * T * T, 33);
  std::vector<float> y(B * T * C), want_y(y.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t d = 0; d < HS; ++d) {
          double sum = 0;
          for (int64_t j = 0; j < T; ++j) sum += double(att[score(b, h, i, j)]) * qkv_at(b, j, 2, h, d);
          want_y[(b * T + i) * C + h * HS + d] = static_cast<float>(sum);
        }
  // y[b, :, h] = att[b,h] v, written in (B,T,C).
  for (int64_t b = 0; b < B; ++b) {
    gemm_row_major(blas_, T, HS, T, {att.data() + b * NH * T * T, DType::kF32, T, T * T, false},
                   {qkv_part(b, 2), DType::kF32, 3 * C, HS, false},
                   {y.data() + b * T * C, DType::kF32, C, HS}, NH, 1.0f, 0.0f);
  }
  expect_near(y, want_y);
}

TEST_F(CudaGemmAttentionLayout, BackwardGradients) {
  const auto att = random_floats(B * NH * T * T, 34), dout = random_floats(B * T * C, 35),
             dpreatt = random_floats(B * NH * T * T, 36);
  std::vector<float> datt(B * NH * T * T), want_datt(datt.size());
  std::vector<float> want_dqkv = dqkv_;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h) {
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          double sum = 0;
          for (int64_t d = 0; d < HS; ++d) {
            sum += double(dout[(b * T + i) * C + h * HS + d]) * qkv_at(b, j, 2, h, d);
          }
          want_datt[score(b, h, i, j)] = static_cast<float>(sum);
        }
      for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < HS; ++d) {
          double dq = 0, dk = 0, dv = 0;
          for (int64_t i = 0; i < T; ++i) {
            dq += double(dpreatt[score(b, h, t, i)]) * qkv_at(b, i, 1, h, d);
            dk += double(dpreatt[score(b, h, i, t)]) * qkv_at(b, i, 0, h, d);
            dv += double(att[score(b, h, i, t)]) * dout[(b * T + i) * C + h * HS + d];
          }
          const int64_t at = (b * T + t) * 3 * C + h * HS + d;
          want_dqkv[at] += static_cast<float>(dq);
          want_dqkv[at + C] += static_cast<float>(dk);
          want_dqkv[at + 2 * C] += static_cast<float>(dv);
        }
    }
  for (int64_t b = 0; b < B; ++b) {
    const float* att_b = att.data() + b * NH * T * T;
    const float* dpre_b = dpreatt.data() + b * NH * T * T;
    const float* dout_b = dout.data() + b * T * C;
    // datt = dout v^T; dv += att^T dout; dq += dpreatt k; dk += dpreatt^T q.
    gemm_row_major(blas_, T, T, HS, {dout_b, DType::kF32, C, HS, false},
                   {qkv_part(b, 2), DType::kF32, 3 * C, HS, true},
                   {datt.data() + b * NH * T * T, DType::kF32, T, T * T}, NH, 1.0f, 0.0f);
    gemm_row_major(blas_, T, HS, T, {att_b, DType::kF32, T, T * T, true},
                   {dout_b, DType::kF32, C, HS, false},
                   {dqkv_part(b, 2), DType::kF32, 3 * C, HS}, NH, 1.0f, 1.0f);
    gemm_row_major(blas_, T, HS, T, {dpre_b, DType::kF32, T, T * T, false},
                   {qkv_part(b, 1), DType::kF32, 3 * C, HS, false},
                   {dqkv_part(b, 0), DType::kF32, 3 * C, HS}, NH, 1.0f, 1.0f);
    gemm_row_major(blas_, T, HS, T, {dpre_b, DType::kF32, T, T * T, true},
                   {qkv_part(b, 0), DType::kF32, 3 * C, HS, false},
                   {dqkv_part(b, 1), DType::kF32, 3 * C, HS}, NH, 1.0f, 1.0f);
  }
  expect_near(datt, want_datt);
  expect_near(dqkv_, want_dqkv);
}

}  // namespace
}  // namespace mixtrain::gpu
