// Why: RoPE on the CPU against a double reference written from Hugging
// Face's rotate-half equations (cos/sin of t * theta^(-2i/HS)); the
// backward as the forward's transpose (<R x, y> = <x, R^T y>, with the
// reference's finite differences); in place and in every dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend_test_util.h"
#include "engine/backend/backend.h"

namespace mixtrain::backend_test {
namespace {

constexpr int64_t kBatch = 2, kSeq = 5, kHeads = 3, kHeadSize = 8;
constexpr double kTheta = 10000.0;

// freqs (T, HS/2, 2): cos and sin of t * theta^(-2i/HS), in double.
std::vector<double> ref_freqs(int64_t seq, int64_t head_size) {
  std::vector<double> f;
  for (int64_t t = 0; t < seq; ++t) {
    for (int64_t i = 0; i < head_size / 2; ++i) {
      const double angle =
          static_cast<double>(t) * std::pow(kTheta, -2.0 * static_cast<double>(i) / head_size);
      f.push_back(std::cos(angle));
      f.push_back(std::sin(angle));
    }
  }
  return f;
}

// HF's q * cos + rotate_half(q) * sin per head, rotate_half(x) = (-x2, x1).
std::vector<double> ref_rope(const std::vector<double>& x, const std::vector<double>& freqs,
                             int64_t seq, int64_t heads, int64_t head_size, double sign) {
  std::vector<double> out(x.size());
  const int64_t half = head_size / 2, width = heads * head_size;
  for (int64_t row = 0; row * width < static_cast<int64_t>(x.size()); ++row) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t base = row * width + h * head_size;
      for (int64_t i = 0; i < half; ++i) {
        const double c = freqs[((row % seq) * half + i) * 2];
        const double s = sign * freqs[((row % seq) * half + i) * 2 + 1];
        out[base + i] = x[base + i] * c - x[base + i + half] * s;
        out[base + i + half] = x[base + i + half] * c + x[base + i] * s;
      }
    }
  }
  return out;
}

TEST(CpuRope, ForwardMatchesTheReferenceAndBackwardIsItsTranspose) {
  auto backend = make_backend("cpu");
  const Shape shape{kBatch, kSeq, kHeads, kHeadSize};
  const int64_t n = shape_numel(shape);
  const std::vector<double> freqs = ref_freqs(kSeq, kHeadSize);
  const Tensor freqs_t = make_tensor(*backend, {kSeq, kHeadSize / 2, 2}, DType::kF32, freqs);
  const std::vector<double> freqs32 = values_of(*backend, freqs_t);
  const std::vector<double> x =
      values_of(*backend, make_tensor(*backend, {n}, DType::kF32, random_values(n, 1, -2.0, 2.0)));
  const std::vector<double> probe = random_values(n, 2);

  // The reference's gradient of <rope(x), probe> is rope back of probe.
  const std::vector<double> fd = finite_differences(
      [&](const std::vector<double>& v) {
        return dot(ref_rope(v, freqs, kSeq, kHeads, kHeadSize, 1.0), probe);
      },
      x);
  EXPECT_TRUE(
      all_close(ref_rope(probe, freqs, kSeq, kHeads, kHeadSize, -1.0), fd, kFiniteDifferenceTol));

  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor inp = make_tensor(*backend, shape, dtype, x);
    const Tensor out = backend->empty(shape, dtype, MemoryCategory::kActivations);
    backend->rope_forward(out, inp, freqs_t);
    const std::vector<double> rounded = values_of(*backend, inp);
    EXPECT_TRUE(all_close(values_of(*backend, out),
                          ref_rope(rounded, freqs32, kSeq, kHeads, kHeadSize, 1.0),
                          tolerance(dtype)));
    backend->rope_forward(inp, inp, freqs_t);  // in place
    EXPECT_EQ(values_of(*backend, inp), values_of(*backend, out));

    const Tensor dout = make_tensor(*backend, shape, dtype, probe);
    const std::vector<double> start = random_values(n, 3);
    const Tensor dinp = make_tensor(*backend, shape, dtype, start);
    std::vector<double> want =
        ref_rope(values_of(*backend, dout), freqs32, kSeq, kHeads, kHeadSize, -1.0);
    const std::vector<double> before = values_of(*backend, dinp);
    for (int64_t i = 0; i < n; ++i) want[i] += before[i];
    backend->rope_backward(dinp, dout, freqs_t);
    EXPECT_TRUE(all_close(values_of(*backend, dinp), want, tolerance(dtype)));
  }
}

TEST(CpuRope, ALongerFrequencyTableServesShorterSequences) {
  auto backend = make_backend("cpu");
  const std::vector<double> freqs = ref_freqs(16, kHeadSize);
  const Tensor table = make_tensor(*backend, {16, kHeadSize / 2, 2}, DType::kF32, freqs);
  const Shape shape{kBatch, kSeq, kHeads, kHeadSize};
  const std::vector<double> x = random_values(shape_numel(shape), 4);
  const Tensor inp = make_tensor(*backend, shape, DType::kF32, x);
  const Tensor out = backend->empty(shape, DType::kF32, MemoryCategory::kActivations);
  backend->rope_forward(out, inp, table);
  EXPECT_TRUE(all_close(
      values_of(*backend, out),
      ref_rope(values_of(*backend, inp), values_of(*backend, table), kSeq, kHeads, kHeadSize, 1.0),
      tolerance(DType::kF32)));
}

}  // namespace
}  // namespace mixtrain::backend_test
