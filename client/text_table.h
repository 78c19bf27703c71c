// Why: `jobs` and `workers` print rows people scan by column, like
// `kubectl get` and `docker ps`: a header and left-aligned columns two
// spaces apart, each as wide as its widest cell.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace mixtrain::cli {

class TextTable {
 public:
  // A table with these column headers.
  explicit TextTable(std::vector<std::string> headers) : rows_{std::move(headers)} {}

  // Adds a row; missing cells are blank, extra cells are dropped.
  void add_row(std::vector<std::string> cells);

  // Writes the header and the rows, without trailing spaces.
  void print(std::ostream& out) const;

 private:
  std::vector<std::vector<std::string>> rows_;  // rows_[0] is the header
};

// "1.2 GiB", "340.0 MiB", "12 B": a byte count as the tables show it.
std::string format_bytes(double bytes);
// "12.3M", "1.1T", "512": a count in powers of 1000.
std::string format_count(double count);

// `text` cut to at most `width` characters, ending in "..." when cut; a
// newline ends it too.
std::string trim_cell(const std::string& text, size_t width);

}  // namespace mixtrain::cli
