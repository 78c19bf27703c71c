// Why: `mixtrain train` and `mixtrain local` both take --summary-json FILE:
// the path is checked before any work (not after a long run), and the file
// is written through a temporary and a rename so a reader never sees half.
#pragma once

#include <ostream>
#include <string>

namespace mixtrain::launch {

// True when FILE's directory exists; otherwise prints "<who>: cannot write
// --summary-json FILE: no directory D" to `err` and returns false.
bool summary_path_usable(const std::string& path, const std::string& who, std::ostream& err);

// Writes `json_text` and a newline to `path` atomically. Returns false after
// printing "<who>: cannot write --summary-json FILE..." to `err`.
bool write_summary_file(const std::string& path, const std::string& json_text,
                        const std::string& who, std::ostream& err);

}  // namespace mixtrain::launch
