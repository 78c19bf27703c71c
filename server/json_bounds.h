// Why: nlohmann::json copies, dumps and compares recursively, so a JSON
// document nested 100,000 deep (200 KB) overflows the stack of whoever
// touches it (issue 13). The coordinator stores and merges JSON that
// workers send; each such text is measured here first, by a loop that
// never recurses, and refused when it is nested deeper than a summary
// ever is.
#pragma once

#include <string_view>

#include <absl/status/status.h>

namespace mixtrain::server {

// How deep a rank's summary (DESIGN.md §5) may nest: it needs 4.
inline constexpr int kMaxJsonDepth = 32;

// OK when `text` nests arrays and objects at most `max_depth` deep
// (brackets inside strings do not count). Otherwise INVALID_ARGUMENT
// naming `what`. Does not check that `text` is valid JSON.
absl::Status check_json_depth(std::string_view text, std::string_view what,
                              int max_depth = kMaxJsonDepth);

}  // namespace mixtrain::server
