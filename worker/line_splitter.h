// Why: the agent reads its task process's stdout and stderr in chunks as
// they arrive, but forwards whole lines; this turns the chunks back into
// lines, cutting overlong ones so that a child
// printing without newlines cannot make the agent hold unbounded memory.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "worker/chunk_splitter.h"

namespace mixtrain::worker {

class LineSplitter : public ChunkSplitter {
 public:
  // Lines longer than this are cut into pieces of this length.
  static constexpr size_t kMaxLine = 16 * 1024;

  // Calls `on_line` with each line (without its newline).
  explicit LineSplitter(std::function<void(std::string)> on_line) : on_line_(std::move(on_line)) {}

  // Adds bytes; calls on_line for each line they complete.
  void add(std::string_view bytes) override;
  // Hands out what is left after the last newline as a final line, if any.
  void finish() override;

 private:
  std::function<void(std::string)> on_line_;
  std::string partial_;
};

}  // namespace mixtrain::worker
