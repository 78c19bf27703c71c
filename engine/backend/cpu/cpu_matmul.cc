// Why: the linear layer on the CPU, forward and backward side by side: the
// forward (then its GELU, when asked) and the input/weight gradients are
// GEMMs (CpuGemm), and the bias
// gradient is a column sum, accumulated in fp32 per column block so each
// thread owns its columns and needs no reduction.
#include <algorithm>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/cpu_gemm.h"
#include "engine/common/cpu_features.h"

namespace mixtrain {
namespace {

constexpr int64_t kColumnBlock = 64;

// sums[j] += src[r * stride + j] for r < rows, j < width (width <= kColumnBlock).
template <class T>
MIXTRAIN_MULTIVERSION void add_column_block(float* sums, const T* src, int64_t rows, int64_t stride,
                                            int64_t width) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = src + r * stride;
    for (int64_t j = 0; j < width; ++j) sums[j] += to_float(row[j]);
  }
}

}  // namespace

void CpuBackend::do_matmul(const Tensor& c, const Tensor& a, const Tensor& b,
                           const MatmulOptions& options) {
  gemm_->matmul(c, a, b, options);
  if (options.gelu_out != nullptr) gelu_forward(*options.gelu_out, c);
  if (options.bias_grad != nullptr) bias_backward(*options.bias_grad, a);
}

void CpuBackend::do_bias_backward(const Tensor& dbias, const Tensor& dout) {
  const int64_t n = dout.dim(-1);
  const int64_t rows = n == 0 ? 0 : dout.numel() / n;
  dispatch_float(dbias.dtype(), "bias_backward dbias", [&](auto dbias_tag) {
    dispatch_float(dout.dtype(), "bias_backward dout", [&](auto dout_tag) {
      using TBias = decltype(dbias_tag);
      using TOut = decltype(dout_tag);
      TBias* db = dbias.data_as<TBias>();
      const TOut* d = dout.data_as<TOut>();
      const int64_t blocks = (n + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
      for (int64_t block = 0; block < blocks; ++block) {
        const int64_t j0 = block * kColumnBlock;
        const int64_t width = std::min(kColumnBlock, n - j0);
        float sums[kColumnBlock] = {};
        add_column_block(sums, d + j0, rows, n, width);
        for (int64_t j = 0; j < width; ++j) {
          db[j0 + j] = from_float<TBias>(to_float(db[j0 + j]) + sums[j]);
        }
      }
    });
  });
}

}  // namespace mixtrain
