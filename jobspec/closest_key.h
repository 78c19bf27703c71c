// Why: a mistyped key in a job spec or a --set override should come back
// with "did you mean 'micro_batch'?", which needs an edit distance.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace mixtrain::jobspec {

// The candidate nearest to `typed` by optimal-string-alignment distance
// (insert, delete, substitute, swap two neighbours), or nullopt when even
// the nearest is too far to be a typo: more than 1 edit for keys of up to
// 4 characters, 2 up to 8, 3 beyond. Ties go to the earlier candidate.
std::optional<std::string_view> closest_key(std::string_view typed,
                                            std::span<const std::string_view> candidates);

}  // namespace mixtrain::jobspec
