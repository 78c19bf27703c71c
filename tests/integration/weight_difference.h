// Why: the multi-process tests compare a run's final fp32 weights with a
// reference run's, where the sums were taken in another order; they all
// measure the difference the same way, relative to the reference's scale.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace mixtrain {

struct Difference {
  double max_norm = 0.0;  // max |a - b| / max |b|
  double l2 = 0.0;        // ||a - b|| / ||b||
};

// How far `a` is from the reference `b` (of the same size).
inline Difference difference(const std::vector<float>& a, const std::vector<float>& b) {
  double max_error = 0.0, max_scale = 0.0, sq_error = 0.0, sq_scale = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    max_error = std::max(max_error, std::fabs(d));
    max_scale = std::max(max_scale, std::fabs(static_cast<double>(b[i])));
    sq_error += d * d;
    sq_scale += static_cast<double>(b[i]) * b[i];
  }
  return Difference{max_error / max_scale, std::sqrt(sq_error / sq_scale)};
}

}  // namespace mixtrain
