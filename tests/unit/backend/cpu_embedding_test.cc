// Why: the embedding backward is a scatter-add where many rows share an id,
// the classic place for a race or an order-dependent sum. These tests check
// forward and backward against a double reference in every dtype pair, the
// backward against finite differences, that its bits do not depend on the
// thread count, and that a bad id is reported with the vocab size.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "backend_test_util.h"

namespace mixtrain::backend_test {
namespace {

constexpr int64_t kVocab = 11;
constexpr int64_t kChannels = 24;
// Ids with repeats, the first and the last id, and unused ids.
const std::vector<int32_t> kIds = {3, 0, 10, 3, 7, 3, 0, 9};

// out (N,C) = table[ids] (+ out when accumulating).
std::vector<double> ref_embedding_forward(const std::vector<double>& table,
                                          const std::vector<int32_t>& ids, std::vector<double> out,
                                          bool accumulate, int64_t channels) {
  for (size_t n = 0; n < ids.size(); ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      const double row = table[ids[n] * channels + c];
      double& o = out[n * channels + c];
      o = accumulate ? o + row : row;
    }
  }
  return out;
}

// dtable[ids[n]] += dout[n].
std::vector<double> ref_embedding_backward(std::vector<double> dtable,
                                           const std::vector<double>& dout,
                                           const std::vector<int32_t>& ids, int64_t channels) {
  for (size_t n = 0; n < ids.size(); ++n) {
    for (int64_t c = 0; c < channels; ++c) dtable[ids[n] * channels + c] += dout[n * channels + c];
  }
  return dtable;
}

const int64_t kRows = static_cast<int64_t>(kIds.size());

TEST(CpuEmbedding, ForwardMatchesReferenceForEveryDtypePair) {
  auto backend = make_backend("cpu");
  Tensor ids = make_ids(*backend, kIds);
  for (DType table_type : kFloatTypes) {
    for (DType out_type : kFloatTypes) {
      for (bool accumulate : {false, true}) {
        SCOPED_TRACE(std::string("table ") + dtype_name(table_type) + ", out " +
                     dtype_name(out_type) + (accumulate ? ", accumulate" : ""));
        Tensor table = make_tensor(*backend, {kVocab, kChannels}, table_type,
                                   random_values(kVocab * kChannels, 1));
        Tensor out = make_tensor(*backend, {2, kRows / 2, kChannels}, out_type,
                                 random_values(kRows * kChannels, 2));
        const std::vector<double> want = ref_embedding_forward(
            values_of(*backend, table), kIds, values_of(*backend, out), accumulate, kChannels);
        backend->embedding_forward(out, ids, table, accumulate);
        EXPECT_TRUE(all_close(values_of(*backend, out), want, tolerance(out_type)));
      }
    }
  }
}

TEST(CpuEmbedding, BackwardAddsIntoTheTableForEveryDtypePair) {
  auto backend = make_backend("cpu");
  Tensor ids = make_ids(*backend, kIds);
  for (DType dtable_type : kFloatTypes) {
    for (DType dout_type : kFloatTypes) {
      SCOPED_TRACE(std::string("dtable ") + dtype_name(dtable_type) + ", dout " +
                   dtype_name(dout_type));
      Tensor dtable = make_tensor(*backend, {kVocab, kChannels}, dtable_type,
                                  random_values(kVocab * kChannels, 3));
      Tensor dout =
          make_tensor(*backend, {kRows, kChannels}, dout_type, random_values(kRows * kChannels, 4));
      const std::vector<double> want = ref_embedding_backward(
          values_of(*backend, dtable), values_of(*backend, dout), kIds, kChannels);
      backend->embedding_backward(dtable, dout, ids);
      EXPECT_TRUE(all_close(values_of(*backend, dtable), want, tolerance(dtable_type)));
    }
  }
}

TEST(CpuEmbedding, BackwardMatchesFiniteDifferences) {
  auto backend = make_backend("cpu");
  const std::vector<double> table =
      values_of(*backend, make_tensor(*backend, {kVocab, kChannels}, DType::kF32,
                                      random_values(kVocab * kChannels, 5)));
  const std::vector<double> probe = values_of(
      *backend,
      make_tensor(*backend, {kRows, kChannels}, DType::kF32, random_values(kRows * kChannels, 6)));
  // L(table) = <forward(table), probe>, so dL/dtable = backward(dout = probe).
  const std::vector<double> zeros_out(kRows * kChannels, 0.0);
  const std::vector<double> fd = finite_differences(
      [&](const std::vector<double>& t) {
        return dot(ref_embedding_forward(t, kIds, zeros_out, false, kChannels), probe);
      },
      table);
  const std::vector<double> zeros_table(table.size(), 0.0);
  EXPECT_TRUE(all_close(ref_embedding_backward(zeros_table, probe, kIds, kChannels), fd,
                        kFiniteDifferenceTol));

  Tensor dtable = backend->zeros({kVocab, kChannels}, DType::kF32, MemoryCategory::kGrads);
  backend->embedding_backward(dtable, make_tensor(*backend, {kRows, kChannels}, DType::kF32, probe),
                              make_ids(*backend, kIds));
  EXPECT_TRUE(all_close(values_of(*backend, dtable), fd, kFp32VsFiniteDifferenceTol));
}

TEST(CpuEmbedding, BackwardBitsDoNotDependOnTheThreadCount) {
  auto backend = make_backend("cpu");
  // Many rows on few ids: every id gathers hundreds of rows.
  const int64_t rows = 4096;
  const int64_t vocab = 37;
  const int64_t channels = 64;
  std::vector<int32_t> id_values(rows);
  for (int64_t n = 0; n < rows; ++n) id_values[n] = static_cast<int32_t>((n * n + 3 * n) % vocab);
  Tensor ids = make_ids(*backend, id_values);
  Tensor dout = make_tensor(*backend, {rows, channels}, DType::kF32,
                            random_values(rows * channels, 7, -100.0, 100.0));
  std::vector<std::vector<double>> results;
  for (int threads : {1, 2, 3}) {
    Tensor dtable = backend->zeros({vocab, channels}, DType::kF32, MemoryCategory::kGrads);
    with_threads(threads, [&] { backend->embedding_backward(dtable, dout, ids); });
    results.push_back(values_of(*backend, dtable));
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(CpuEmbedding, OutOfRangeIdsAndBadShapesThrow) {
  auto backend = make_backend("cpu");
  Tensor table = backend->zeros({kVocab, kChannels}, DType::kBF16, MemoryCategory::kParams);
  Tensor out = backend->zeros({3, kChannels}, DType::kBF16, MemoryCategory::kActivations);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->embedding_forward(out, make_ids(*backend, {1, 11, 2}), table, false);
      },
      {"embedding_forward", "ids", "11", "vocab size is 11"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->embedding_backward(table, out, make_ids(*backend, {-1, 0, 2}));
      },
      {"embedding_backward", "-1", "vocab size is 11"}));
  Tensor narrow = backend->zeros({3, kChannels - 1}, DType::kF32, MemoryCategory::kActivations);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        backend->embedding_forward(narrow, make_ids(*backend, {1, 2, 3}), table, false);
      },
      {"embedding_forward", "out", "fp32(3, 23)"}));
  Tensor float_ids = backend->zeros({3}, DType::kF32, MemoryCategory::kActivations);
  EXPECT_TRUE(
      throws_invalid_argument([&] { backend->embedding_forward(out, float_ids, table, false); },
                              {"embedding_forward", "ids", "int32"}));
}

}  // namespace
}  // namespace mixtrain::backend_test
