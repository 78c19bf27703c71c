// Why: see json_bounds.h.
#include "server/json_bounds.h"

#include <string>

namespace mixtrain::server {

absl::Status check_json_depth(std::string_view text, std::string_view what, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return absl::InvalidArgumentError(std::string(what) + " is nested more than " +
                                          std::to_string(max_depth) + " levels deep");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return absl::OkStatus();
}

}  // namespace mixtrain::server
