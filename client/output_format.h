// Why: every command that prints data offers the same two forms (`-o`):
// aligned text for people and JSON for scripts (DESIGN.md §5).
#pragma once

namespace mixtrain::cli {

enum class OutputFormat { kTable, kJson };

}  // namespace mixtrain::cli
