// Why: `mixtrain status ID` of a finished job shows where its gradients
// ended up against the range of their dtype (precision.stats_every): a
// terminal bar chart of the summary's last gradient-range histogram,
// summed over the ranks (each measured the gradients it owns), with the
// dtype's smallest subnormal, smallest normal and largest value marked;
// with compute fp8 a second chart shows the quantized GEMM inputs against
// E4M3's range (how well the fp8 scales place them).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

namespace mixtrain::cli {

// Prints the chart of `summary`'s ranks[].gradient_range (DESIGN.md §5
// summary JSON), then of its fp8_activations when present; prints nothing
// for a histogram no rank has or one that is malformed.
void print_gradient_range_chart(const nlohmann::ordered_json& summary, std::ostream& out);

}  // namespace mixtrain::cli
