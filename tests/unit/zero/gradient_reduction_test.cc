// Why: zero.reduce_dtype: fp32 exists to spare 16-bit gradients a
// rounding per ring hop. That is a property of the reduced gradients
// themselves, the same bits on every CPU (each hop is a correctly rounded
// add, cpu_reduce.h), unlike the weights after a few steps, which the bf16
// compute kernels (AVX2 or AVX-512 BF16, chosen at run time) dominate:
// comparing those was a coin flip (issue 29). Here four ranks, threads
// over Gloo, reduce the same bf16 gradients at every stage, widened and in
// bf16, and every owned sum is compared with the exact (fp64) sum: widened,
// within one bf16 rounding of it; in bf16, within the roundings of its
// N-1 hops, and for some elements beyond one rounding.
#include "engine/zero/gradient_reduction.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/comm/make_communicator.h"
#include "engine/comm/memory_store.h"
#include "engine/numerics/convert.h"

namespace mixtrain {
namespace {

constexpr int kRanks = 4;
constexpr double kBf16Roundoff = 0x1p-8;  // half an ulp, relative
constexpr double kFp32Roundoff = 0x1p-24;

// Rank `rank`'s gradients over the flat buffer: exact bf16 values (8
// significant bits) of either sign in [1/8, 2) at every parameter element,
// zero in the padding. Four of them sum exactly in fp32. mt19937's output
// is fixed by the standard, so every machine reduces the same values.
std::vector<float> rank_gradients(const ParameterLayout& layout, int rank) {
  std::mt19937 bits(1000 + rank);
  std::vector<float> values(static_cast<size_t>(layout.numel()), 0.0f);
  for (const ParameterInfo& info : layout.parameters()) {
    for (int64_t i = info.offset; i < info.offset + info.numel; ++i) {
      const uint32_t r = bits();
      const float magnitude =
          std::ldexp(static_cast<float>(0x80 | (r & 0x7F)), -7 - static_cast<int>((r >> 7) & 3));
      values[static_cast<size_t>(i)] = ((r >> 9) & 1) != 0 ? -magnitude : magnitude;
    }
  }
  return values;
}

// The reduced gradients a rank owns, by flat element.
struct OwnedSums {
  std::vector<int64_t> flat;
  std::vector<float> sums;
};

// Reduces `gradients` (this rank's) over kRanks ranks meeting in `store`,
// as one micro-batch of backward hands them to the stage's strategy: unit
// by unit from the last, then waits for every reduction.
OwnedSums reduce_on_rank(Store& store, int rank, const ParameterLayout& layout, int stage,
                         bool reduce_in_fp32, const std::vector<float>& gradients) {
  const std::unique_ptr<Backend> backend = make_backend("cpu");
  const std::unique_ptr<Communicator> comm = make_communicator("gloo", store, rank, kRanks);
  const ZeroPartition partition(layout, rank, kRanks);
  const ZeroContext context{*backend, layout, partition, comm.get()};
  const ZeroSettings settings{.stage = stage, .reduce_in_fp32 = reduce_in_fp32};
  const ZeroPlacement placement = zero_placement(settings, DType::kBF16);
  const int64_t numel =
      placement.gradients.extent == Extent::kFull ? layout.numel() : partition.numel();
  const PlacedTensor grads(
      context.allocate(numel, DType::kBF16, MemoryCategory::kGrads, placement.gradients.pool),
      placement.gradients.extent);
  const std::unique_ptr<GradientReduction> reduction =
      make_gradient_reduction(context, placement, grads, settings);
  for (size_t unit = layout.units().size(); unit-- > 0;) {
    reduction->begin_unit(unit);
    const ParameterUnit& range = layout.units()[unit];
    for (size_t p = range.first_parameter; p < range.end_parameter; ++p) {
      const ParameterInfo& info = layout.parameters()[p];
      convert(gradients.data() + info.offset, DType::kF32, reduction->grad(info).data(),
              DType::kBF16, static_cast<size_t>(info.numel));
    }
    reduction->end_unit(unit, /*last_micro_batch=*/true);
  }
  reduction->finish();
  OwnedSums owned;
  for (const PartitionSegment& segment : partition.segments()) {
    std::vector<float> sums(static_cast<size_t>(segment.numel));
    convert(grads.at(segment).data(), DType::kBF16, sums.data(), DType::kF32, sums.size());
    for (int64_t i = 0; i < segment.numel; ++i) owned.flat.push_back(segment.flat_offset + i);
    owned.sums.insert(owned.sums.end(), sums.begin(), sums.end());
  }
  return owned;
}

TEST(GradientReduction, Bf16SumsRoundOnceWidenedToFp32AndOncePerHopInBf16) {
  const ParameterLayout layout(GptConfig{2, 2, 32, 16, 256}, kRanks);
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < kRanks; ++r) inputs.push_back(rank_gradients(layout, r));
  for (int stage = 0; stage <= 3; ++stage) {
    for (const bool in_fp32 : {true, false}) {
      const std::string where =
          "stage " + std::to_string(stage) + (in_fp32 ? ", reduced in fp32" : ", reduced in bf16");
      MemoryStore store;
      std::vector<std::future<OwnedSums>> ranks;
      for (int r = 0; r < kRanks; ++r) {
        ranks.push_back(std::async(std::launch::async, reduce_on_rank, std::ref(store), r,
                                   std::cref(layout), stage, in_fp32, std::cref(inputs[r])));
      }
      int64_t checked = 0, beyond_one_rounding = 0;
      for (std::future<OwnedSums>& rank : ranks) {
        const OwnedSums owned = rank.get();
        for (size_t k = 0; k < owned.flat.size(); ++k) {
          double exact = 0.0, magnitude = 0.0;
          for (const std::vector<float>& input : inputs) {
            exact += input[static_cast<size_t>(owned.flat[k])];
            magnitude += std::fabs(input[static_cast<size_t>(owned.flat[k])]);
          }
          const double error = std::fabs(owned.sums[k] - exact);
          // The fp32 sum's own roundings (none for these values) and the one
          // rounding to bf16; in bf16, one rounding of a partial sum per hop.
          const double one_rounding =
              kBf16Roundoff * std::fabs(exact) + (kRanks - 1) * kFp32Roundoff * magnitude;
          const double per_hop = (kRanks - 1) * kBf16Roundoff * magnitude * (1 + kBf16Roundoff);
          ASSERT_LE(error, in_fp32 ? one_rounding : per_hop)
              << where << ", element " << owned.flat[k] << ": " << owned.sums[k] << " for "
              << exact;
          if (error > one_rounding) ++beyond_one_rounding;
          ++checked;
        }
      }
      std::printf("%s: %lld of %lld sums beyond one bf16 rounding of the exact sum\n",
                  where.c_str(), static_cast<long long>(beyond_one_rounding),
                  static_cast<long long>(checked));
      EXPECT_EQ(checked, layout.param_count()) << where;  // every parameter, by one rank
      if (!in_fp32) {
        EXPECT_GT(beyond_one_rounding, checked / 100) << where;
      }
    }
  }
}

}  // namespace
}  // namespace mixtrain
