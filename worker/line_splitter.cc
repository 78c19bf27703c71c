// Why: see line_splitter.h.
#include "worker/line_splitter.h"

namespace mixtrain::worker {

void LineSplitter::add(std::string_view bytes) {
  for (const char c : bytes) {
    if (c == '\n') {
      on_line_(std::move(partial_));
      partial_.clear();
      continue;
    }
    partial_.push_back(c);
    if (partial_.size() == kMaxLine) {
      on_line_(std::move(partial_));
      partial_.clear();
    }
  }
}

void LineSplitter::finish() {
  if (partial_.empty()) return;
  on_line_(std::move(partial_));
  partial_.clear();
}

}  // namespace mixtrain::worker
