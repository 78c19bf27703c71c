// Why: copies parameters one by one between the plain and the padded layout.
#include "engine/zero/padded_weights.h"

#include <algorithm>
#include <string>

#include "engine/common/error.h"

namespace mixtrain {

std::vector<float> padded_weights(const ParameterLayout& padded, std::span<const float> plain) {
  MIXTRAIN_CHECK_ARG(static_cast<int64_t>(plain.size()) == padded.param_count(),
                     "padded_weights: got " + std::to_string(plain.size()) +
                         " values, the model has " + std::to_string(padded.param_count()));
  std::vector<float> out(static_cast<size_t>(padded.numel()), 0.0f);
  int64_t next = 0;
  for (const ParameterInfo& info : padded.parameters()) {
    std::copy_n(plain.begin() + next, info.numel, out.begin() + info.offset);
    next += info.numel;
  }
  return out;
}

std::vector<float> unpadded_weights(const ParameterLayout& padded, std::span<const float> values) {
  MIXTRAIN_CHECK_ARG(static_cast<int64_t>(values.size()) == padded.numel(),
                     "unpadded_weights: got " + std::to_string(values.size()) +
                         " values, the padded layout has " + std::to_string(padded.numel()));
  std::vector<float> out;
  out.reserve(static_cast<size_t>(padded.param_count()));
  for (const ParameterInfo& info : padded.parameters())
    out.insert(out.end(), values.begin() + info.offset, values.begin() + info.offset + info.numel);
  return out;
}

}  // namespace mixtrain
