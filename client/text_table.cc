// Why: see text_table.h.
#include "client/text_table.h"

#include <algorithm>
#include <cstdio>

namespace mixtrain::cli {

void TextTable::add_row(std::vector<std::string> cells) {
  cells.resize(rows_.front().size());
  rows_.push_back(std::move(cells));
}

void TextTable::print(std::ostream& out) const {
  std::vector<size_t> widths(rows_.front().size(), 0);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows_) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << "\n";
  }
}

std::string trim_cell(const std::string& text, size_t width) {
  const std::string cell = text.substr(0, text.find('\n'));
  if (cell.size() == text.size() && cell.size() <= width) return cell;
  return cell.substr(0, std::min(cell.size(), width > 3 ? width - 3 : 0)) + "...";
}

namespace {

// `value` in the largest of `units` (each `base` times the one before) that
// keeps it at least 1: "%.0f" in the first unit, "%.1f" beyond.
std::string scaled(double value, double base, const std::vector<const char*>& units,
                   const char* separator) {
  size_t unit = 0;
  while (value >= base && unit + 1 < units.size()) {
    value /= base;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), unit == 0 ? "%.0f%s%s" : "%.1f%s%s", value, separator,
                units[unit]);
  return text;
}

}  // namespace

std::string format_bytes(double bytes) {
  return scaled(bytes, 1024.0, {"B", "KiB", "MiB", "GiB", "TiB"}, " ");
}

std::string format_count(double count) {
  return scaled(count, 1000.0, {"", "K", "M", "G", "T", "P"}, "");
}

}  // namespace mixtrain::cli
