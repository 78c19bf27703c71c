// Why: see closest_key.h; the distance is the textbook dynamic programme
// over a (|a|+1) x (|b|+1) table, fine for keys of a few characters.
#include "jobspec/closest_key.h"

#include <algorithm>
#include <vector>

namespace mixtrain::jobspec {
namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  const size_t columns = b.size() + 1;
  std::vector<size_t> table((a.size() + 1) * columns);
  auto at = [&](size_t i, size_t j) -> size_t& { return table[i * columns + j]; };
  for (size_t i = 0; i <= a.size(); ++i) at(i, 0) = i;
  for (size_t j = 0; j <= b.size(); ++j) at(0, j) = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      size_t best = std::min({at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        best = std::min(best, at(i - 2, j - 2) + 1);
      at(i, j) = best;
    }
  }
  return at(a.size(), b.size());
}

size_t max_typo_distance(size_t length) {
  if (length <= 4) return 1;
  if (length <= 8) return 2;
  return 3;
}

}  // namespace

std::optional<std::string_view> closest_key(std::string_view typed,
                                            std::span<const std::string_view> candidates) {
  std::optional<std::string_view> best;
  size_t best_distance = max_typo_distance(typed.size()) + 1;
  for (std::string_view candidate : candidates) {
    const size_t distance = edit_distance(typed, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace mixtrain::jobspec
