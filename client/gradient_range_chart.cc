// Why: see gradient_range_chart.h. Bucket b of the JSON's "buckets" (from
// "min_log2" up) holds the magnitudes in (2^(b-1), 2^b].
#include "client/gradient_range_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace mixtrain::cli {
namespace {

constexpr int kBarWidth = 40;

// The marks of a dtype: log2 of its smallest subnormal, smallest normal
// and largest value (beyond the chart's range for bf16/fp32 but stated).
struct RangeMarks {
  double subnormal;
  double normal;
  double max;
};

RangeMarks marks_of(const std::string& dtype) {
  if (dtype == "fp16") return {-24, -14, std::log2(65504.0)};
  if (dtype == "fp8_e4m3") return {-9, -6, std::log2(448.0)};
  if (dtype == "fp8_e5m2") return {-16, -14, std::log2(57344.0)};
  return {-149, -126, 128};  // fp32 and bf16 share the exponent range
}

// The sums over the ranks; false when no rank has a well-formed range.
struct Totals {
  int64_t step = 0;
  std::string dtype;
  int min_log2 = 0;
  std::vector<int64_t> buckets;
  int64_t zeros = 0, subnormals = 0, nonfinite = 0;
};

bool add_rank(const nlohmann::ordered_json& range, int64_t step, Totals& totals) {
  if (!range.is_object() || !range.contains("buckets") || !range["buckets"].is_array() ||
      !range.value("min_log2", nlohmann::ordered_json()).is_number_integer())
    return false;
  const auto& buckets = range["buckets"];
  if (totals.buckets.empty()) {
    totals.buckets.assign(buckets.size(), 0);
    totals.min_log2 = range["min_log2"].get<int>();
    totals.step = step;
    totals.dtype = range.value("dtype", std::string("?"));
  }
  if (buckets.size() != totals.buckets.size()) return false;
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (!buckets[i].is_number_integer()) return false;
    totals.buckets[i] += buckets[i].get<int64_t>();
  }
  totals.zeros += range.value("zeros", int64_t{0});
  totals.subnormals += range.value("subnormals", int64_t{0});
  totals.nonfinite += range.value("nonfinite", int64_t{0});
  return true;
}

std::string percent(int64_t part, int64_t whole) {
  char text[32];
  std::snprintf(text, sizeof text, "%6.2f%%",
                whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return text;
}

// The totals over the ranks of the histogram `pick` finds in each rank's
// gradient_range (null: none there); empty buckets when none or malformed.
template <class Pick>
Totals totals_of(const nlohmann::ordered_json& summary, Pick pick) {
  Totals totals;
  if (!summary.is_object() || !summary.contains("ranks") || !summary["ranks"].is_array())
    return totals;
  for (const auto& rank : summary["ranks"]) {
    if (!rank.is_object() || !rank.contains("gradient_range")) continue;
    const auto& range = rank["gradient_range"];
    const nlohmann::ordered_json* histogram = pick(range);
    if (histogram != nullptr && !add_rank(*histogram, range.value("step", int64_t{0}), totals))
      return Totals{};
  }
  return totals;
}

// The chart of `totals`: a heading naming `what` was counted, the zero,
// subnormal and non-finite shares, a bar per power of two with the
// dtype's marks.
void print_chart(const Totals& totals, const std::string& heading, const std::string& what,
                 std::ostream& out) {
  if (totals.buckets.empty()) return;
  int64_t all = totals.zeros + totals.nonfinite;
  for (int64_t count : totals.buckets) all += count;
  const auto nonzero = [](int64_t count) { return count != 0; };
  const auto first = std::find_if(totals.buckets.begin(), totals.buckets.end(), nonzero);
  if (first == totals.buckets.end()) return;
  const auto last = std::find_if(totals.buckets.rbegin(), totals.buckets.rend(), nonzero).base();
  const int64_t tallest = *std::max_element(first, last);
  const RangeMarks marks = marks_of(totals.dtype);

  out << heading << " at step " << totals.step << " (" << totals.dtype << " " << what << ", " << all
      << " elements over all ranks)\n"
      << "  zero        " << percent(totals.zeros, all) << "\n"
      << "  subnormal   " << percent(totals.subnormals, all) << "\n";
  if (totals.nonfinite > 0) out << "  inf/nan     " << percent(totals.nonfinite, all) << "\n";
  for (auto it = first; it != last; ++it) {
    const int b = totals.min_log2 + static_cast<int>(it - totals.buckets.begin());
    const int width = static_cast<int>(std::lround(
        static_cast<double>(kBarWidth) * static_cast<double>(*it) / static_cast<double>(tallest)));
    std::string label = "  <= 2^" + std::to_string(b);
    label.resize(12, ' ');
    out << label << percent(*it, all);
    if (width > 0) out << " " << std::string(static_cast<size_t>(width), '#');
    // A mark in (2^(b-1), 2^b] is this row's.
    for (const auto& [value, name] : {std::pair{marks.subnormal, "smallest subnormal"},
                                      {marks.normal, "smallest normal"},
                                      {marks.max, "max"}}) {
      if (value > b - 1 && value <= b) out << "  <- " << totals.dtype << " " << name;
    }
    out << "\n";
  }
}

}  // namespace

void print_gradient_range_chart(const nlohmann::ordered_json& summary, std::ostream& out) {
  print_chart(totals_of(summary, [](const nlohmann::ordered_json& range) { return &range; }),
              "gradient range", "gradients", out);
  print_chart(totals_of(summary,
                        [](const nlohmann::ordered_json& range) -> const nlohmann::ordered_json* {
                          return range.is_object() && range.contains("fp8_activations")
                                     ? &range["fp8_activations"]
                                     : nullptr;
                        }),
              "fp8 activation range", "quantized GEMM inputs", out);
}

}  // namespace mixtrain::cli
