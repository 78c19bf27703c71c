// Why: see error_text.h.
#include "server/error_text.h"

#include <algorithm>
#include <vector>

namespace mixtrain::server {
namespace {

// The lines of `text`, split at '\n'.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (true) {
    const size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) return lines;
    text.remove_prefix(end + 1);
  }
}

// The longest prefix of `line` of at most `bytes` bytes that ends at a
// UTF-8 character boundary.
std::string_view cut_at_character(std::string_view line, size_t bytes) {
  size_t end = std::min(bytes, line.size());
  while (end > 0 && end < line.size() && (static_cast<unsigned char>(line[end]) & 0xC0) == 0x80) {
    --end;
  }
  return line.substr(0, end);
}

}  // namespace

std::string bounded_error_text(std::string_view text) {
  if (text.size() <= kMaxErrorBytes && split_lines(text).size() <= kMaxErrorLines) {
    return std::string(text);
  }
  const std::vector<std::string_view> lines = split_lines(text);
  std::string bounded;
  size_t kept = 0;
  for (; kept < lines.size() && kept < kMaxErrorLines; ++kept) {
    const size_t separator = kept == 0 ? 0 : 1;
    if (bounded.size() + separator + lines[kept].size() > kMaxErrorBytes) break;
    if (separator != 0) bounded += '\n';
    bounded += lines[kept];
  }
  if (kept == 0) {  // one line longer than the bound alone
    bounded = std::string(cut_at_character(lines[0], kMaxErrorBytes)) + " [cut]";
    kept = 1;
  }
  if (kept < lines.size()) bounded += "\n... and " + std::to_string(lines.size() - kept) + " more";
  return bounded;
}

grpc::Status bounded_status(const grpc::Status& status) {
  if (status.ok()) return status;
  return {status.error_code(), bounded_error_text(status.error_message()),
          status.error_details()};
}

}  // namespace mixtrain::server
