// Why: the fused softmax cross-entropy produces the loss that every run
// reports and the first gradient of the backward pass, possibly written
// over its own input. It is checked against a double log-sum-exp
// reference, its gradient against finite differences of that loss, in
// every dtype pair and in place, with wide logits (where a naive softmax
// overflows), a NaN row, and bad targets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "backend_test_util.h"

namespace mixtrain::backend_test {
namespace {

struct CrossEntropy {
  std::vector<double> losses;   // (N)
  std::vector<double> dlogits;  // (N,V)
};

// losses[n] = logsumexp(logits[n]) - logits[n][target[n]];
// dlogits = dloss * (softmax - onehot(target)).
CrossEntropy ref_cross_entropy(const std::vector<double>& logits,
                               const std::vector<int32_t>& targets, double dloss) {
  const size_t rows = targets.size();
  const size_t vocab = logits.size() / rows;
  CrossEntropy r{std::vector<double>(rows), std::vector<double>(logits.size())};
  for (size_t n = 0; n < rows; ++n) {
    const double* x = &logits[n * vocab];
    const double max = *std::max_element(x, x + vocab);
    double sum = 0.0;
    for (size_t v = 0; v < vocab; ++v) sum += std::exp(x[v] - max);
    r.losses[n] = std::log(sum) + max - x[targets[n]];
    for (size_t v = 0; v < vocab; ++v) {
      const double onehot = static_cast<int32_t>(v) == targets[n] ? 1.0 : 0.0;
      r.dlogits[n * vocab + v] = dloss * (std::exp(x[v] - max) / sum - onehot);
    }
  }
  return r;
}

constexpr int64_t kRows = 5;
constexpr int64_t kVocab = 37;
const std::vector<int32_t> kTargets = {0, 36, 5, 5, 17};
constexpr double kDloss = 1.0 / kRows;  // the mean over rows

TEST(CpuCrossEntropy, GradientMatchesFiniteDifferences) {
  auto backend = make_backend("cpu");
  const DType f32 = DType::kF32;
  const std::vector<double> logits = values_of(
      *backend,
      make_tensor(*backend, {kRows, kVocab}, f32, random_values(kRows * kVocab, 1, -4.0, 4.0)));
  // L = dloss * sum(losses): its gradient is dlogits.
  const std::vector<double> fd = finite_differences(
      [&](const std::vector<double>& x) {
        double total = 0.0;
        for (double l : ref_cross_entropy(x, kTargets, kDloss).losses) total += kDloss * l;
        return total;
      },
      logits);
  EXPECT_TRUE(
      all_close(ref_cross_entropy(logits, kTargets, kDloss).dlogits, fd, kFiniteDifferenceTol));

  Tensor losses = backend->empty({kRows}, f32, MemoryCategory::kActivations);
  Tensor dlogits = backend->empty({kRows, kVocab}, f32, MemoryCategory::kActivations);
  backend->softmax_cross_entropy(losses, &dlogits,
                                 make_tensor(*backend, {kRows, kVocab}, f32, logits),
                                 make_ids(*backend, kTargets), static_cast<float>(kDloss));
  EXPECT_TRUE(all_close(values_of(*backend, dlogits), fd, kFp32VsFiniteDifferenceTol));
}

TEST(CpuCrossEntropy, MatchesReferenceForEveryDtypePair) {
  auto backend = make_backend("cpu");
  Tensor targets = make_ids(*backend, kTargets);
  for (DType logits_type : kFloatTypes) {
    SCOPED_TRACE(std::string("logits ") + dtype_name(logits_type));
    Tensor logits = make_tensor(*backend, {1, kRows, kVocab}, logits_type,
                                random_values(kRows * kVocab, 2, -6.0, 6.0));
    const CrossEntropy want = ref_cross_entropy(values_of(*backend, logits), kTargets, kDloss);
    Tensor losses = backend->empty({kRows}, DType::kF32, MemoryCategory::kActivations);
    backend->softmax_cross_entropy(losses, nullptr, logits, targets, static_cast<float>(kDloss));
    EXPECT_TRUE(all_close(values_of(*backend, losses), want.losses, tolerance(DType::kF32)));
    for (DType dlogits_type : kFloatTypes) {
      SCOPED_TRACE(std::string("dlogits ") + dtype_name(dlogits_type));
      Tensor dlogits = backend->empty({kRows, kVocab}, dlogits_type, MemoryCategory::kActivations);
      backend->fill(losses, 0.0f);
      backend->softmax_cross_entropy(losses, &dlogits, logits, targets, static_cast<float>(kDloss));
      EXPECT_TRUE(all_close(values_of(*backend, losses), want.losses, tolerance(DType::kF32)));
      EXPECT_TRUE(all_close(values_of(*backend, dlogits), want.dlogits, tolerance(dlogits_type)));
    }
  }
}

TEST(CpuCrossEntropy, GradientMayOverwriteTheLogitsOfAWideVocabulary) {
  auto backend = make_backend("cpu");
  // Logits up to +-80: exp without the max subtracted would overflow fp32.
  const int64_t rows = 7;
  const int64_t vocab = 5000;
  std::vector<int32_t> targets;
  for (int64_t n = 0; n < rows; ++n) targets.push_back(static_cast<int32_t>((n * 977) % vocab));
  Tensor target_ids = make_ids(*backend, targets);
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor logits =
        make_tensor(*backend, {rows, vocab}, dtype, random_values(rows * vocab, 3, -80.0, 80.0));
    const CrossEntropy want = ref_cross_entropy(values_of(*backend, logits), targets, 2.5);
    Tensor losses = backend->empty({rows}, DType::kF32, MemoryCategory::kActivations);
    backend->softmax_cross_entropy(losses, &logits, logits, target_ids, 2.5f);
    EXPECT_TRUE(all_close(values_of(*backend, losses), want.losses, tolerance(DType::kF32)));
    EXPECT_TRUE(all_close(values_of(*backend, logits), want.dlogits, tolerance(dtype)));
  }
}

TEST(CpuCrossEntropy, NanLogitGivesNanLossForItsRowOnly) {
  auto backend = make_backend("cpu");
  std::vector<double> values = random_values(kRows * kVocab, 4);
  values[2 * kVocab + 7] = std::numeric_limits<double>::quiet_NaN();
  Tensor logits = make_tensor(*backend, {kRows, kVocab}, DType::kBF16, values);
  Tensor losses = backend->empty({kRows}, DType::kF32, MemoryCategory::kActivations);
  backend->softmax_cross_entropy(losses, nullptr, logits, make_ids(*backend, kTargets), 1.0f);
  const std::vector<double> got = values_of(*backend, losses);
  for (int64_t n = 0; n < kRows; ++n) EXPECT_EQ(std::isnan(got[n]), n == 2) << "row " << n;
}

TEST(CpuCrossEntropy, BadTargetsAndShapesThrow) {
  auto backend = make_backend("cpu");
  Tensor logits = backend->zeros({kRows, kVocab}, DType::kF32, MemoryCategory::kActivations);
  Tensor losses = backend->zeros({kRows}, DType::kF32, MemoryCategory::kActivations);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->softmax_cross_entropy(losses, nullptr, logits,
                                       make_ids(*backend, {0, 1, 37, 2, 3}), 1.0f);
      },
      {"softmax_cross_entropy", "targets", "37", "vocab size is 37"}));
  // A padded vocabulary: a target in the padding is no class.
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->softmax_cross_entropy(losses, nullptr, logits,
                                       make_ids(*backend, {0, 1, 30, 2, 3}), 1.0f, 30);
      },
      {"softmax_cross_entropy", "targets", "30", "number of classes is 30"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->softmax_cross_entropy(losses, nullptr, logits, make_ids(*backend, {0, 1, 2}),
                                       1.0f);
      },
      {"softmax_cross_entropy", "targets", "int32(3)", "5 elements"}));
  Tensor bf16_losses = backend->zeros({kRows}, DType::kBF16, MemoryCategory::kActivations);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->softmax_cross_entropy(bf16_losses, nullptr, logits, make_ids(*backend, kTargets),
                                       1.0f);
      },
      {"softmax_cross_entropy", "losses", "bf16(5)", "fp32"}));
  Tensor narrow = backend->zeros({kRows, kVocab - 1}, DType::kF32, MemoryCategory::kActivations);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->softmax_cross_entropy(losses, &narrow, logits, make_ids(*backend, kTargets), 1.0f);
      },
      {"softmax_cross_entropy", "dlogits", "fp32(5, 36)"}));
}

}  // namespace
}  // namespace mixtrain::backend_test
