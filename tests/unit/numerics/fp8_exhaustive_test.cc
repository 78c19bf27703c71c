// Why: fp8 has few codes, so nearly every fp32 input sits in a rounding,
// subnormal or overflow corner of it. Every one of the 2^32 fp32 patterns
// is checked in both saturation modes: the scalar float_to_fp8 and every
// bulk path this CPU can run, against the arithmetic reference.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "engine/common/cpu_features.h"
#include "exhaustive_sweep.h"
#include "engine/numerics/convert_kernels.h"
#include "engine/numerics/fp8.h"
#include "reference_formats.h"

namespace mixtrain::testing {
namespace {

using convert_detail::ConvertIsa;

struct Fp8Case {
  const RefFormat* reference;
  Fp8Format format;
  DType dtype;
};

void PrintTo(const Fp8Case& c, std::ostream* os) { *os << c.reference->name; }

// The scalar function over a chunk; the compiler may vectorize the loop
// (per-ISA clones), which keeps the sweep to seconds without changing what
// is computed.
template <Fp8Format kFormat, bool kSaturate>
MIXTRAIN_MULTIVERSION void scalar_fp8(const uint32_t* inputs, uint8_t* out) {
  for (size_t i = 0; i < kSweepChunk; ++i) {
    out[i] = float_to_fp8(bits_float(inputs[i]), kFormat, kSaturate);
  }
}

// Specialized per format and mode, so each loop folds its constants.
void scalar_fp8(const uint32_t* inputs, uint8_t* out, Fp8Format format, bool saturate) {
  if (format == Fp8Format::kE4M3) {
    saturate ? scalar_fp8<Fp8Format::kE4M3, true>(inputs, out)
             : scalar_fp8<Fp8Format::kE4M3, false>(inputs, out);
  } else {
    saturate ? scalar_fp8<Fp8Format::kE5M2, true>(inputs, out)
             : scalar_fp8<Fp8Format::kE5M2, false>(inputs, out);
  }
}

class Fp8Exhaustive : public ::testing::TestWithParam<Fp8Case> {};

TEST_P(Fp8Exhaustive, EveryFp32MatchesReferenceScalarAndBulkInBothModes) {
  const Fp8Case& c = GetParam();
  const std::vector<ConvertIsa> isas = vector_isas_to_check();
  const std::vector<Segment> segments[2] = {ref_segments(*c.reference, false),
                                            ref_segments(*c.reference, true)};
  MismatchLog log;
  double seconds = sweep_all_fp32([&](uint32_t begin, const uint32_t* inputs) {
    thread_local std::vector<uint8_t> expected(kSweepChunk), got(kSweepChunk);
    for (bool saturate : {false, true}) {
      std::string mode = saturate ? " saturating" : " non-saturating";
      fill_expected(*c.reference, segments[saturate], begin, kSweepChunk, expected.data());
      scalar_fp8(inputs, got.data(), c.format, saturate);
      compare_codes("scalar" + mode, begin, got.data(), expected.data(), kSweepChunk, log);
      for (ConvertIsa isa : isas) {
        convert_detail::convert_using(isa, inputs, DType::kF32, got.data(), c.dtype, kSweepChunk,
                                      saturate);
        compare_codes(convert_detail::convert_isa_name(isa) + mode, begin, got.data(),
                      expected.data(), kSweepChunk, log);
      }
    }
  });
  report_sweep_time(c.reference->name, seconds);
  EXPECT_EQ(log.count(), 0u) << log.examples();
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8Exhaustive,
                         ::testing::Values(Fp8Case{&kRefE4M3, Fp8Format::kE4M3, DType::kFP8E4M3},
                                           Fp8Case{&kRefE5M2, Fp8Format::kE5M2, DType::kFP8E5M2}),
                         [](const auto& info) { return std::string(info.param.reference->name); });

}  // namespace
}  // namespace mixtrain::testing
