// Why: see byte_size.h.
#include "engine/common/byte_size.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

namespace mixtrain {

std::optional<int64_t> parse_byte_size(std::string_view text) {
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"", 1.0},       {"B", 1.0},    {"K", 0x1p10},   {"KiB", 0x1p10}, {"kB", 1e3},
      {"KB", 1e3},     {"M", 0x1p20}, {"MiB", 0x1p20}, {"MB", 1e6},     {"G", 0x1p30},
      {"GiB", 0x1p30}, {"GB", 1e9},   {"T", 0x1p40},   {"TiB", 0x1p40}, {"TB", 1e12},
  };
  size_t digits = 0;
  while (digits < text.size() &&
         ((text[digits] >= '0' && text[digits] <= '9') || text[digits] == '.'))
    ++digits;
  if (digits == 0) return std::nullopt;
  const std::string number(text.substr(0, digits));
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value)) return std::nullopt;
  const std::string_view unit = text.substr(digits);
  for (const auto& [name, scale] : kUnits) {
    if (unit != name) continue;
    const double bytes = std::round(value * scale);
    if (bytes > 0x1p62) return std::nullopt;
    return static_cast<int64_t>(bytes);
  }
  return std::nullopt;
}

}  // namespace mixtrain
