// Why: the agent reads each pipe of its task process in chunks as they
// arrive (non-blocking, one poll loop for all of them) but acts on whole
// units: lines of output, frames of reports. This is what the poll loop
// feeds; each pipe's splitter decides where its units end.
#pragma once

#include <string_view>

namespace mixtrain::worker {

class ChunkSplitter {
 public:
  virtual ~ChunkSplitter() = default;
  // Adds bytes as read; hands out each unit they complete.
  virtual void add(std::string_view bytes) = 0;
  // The pipe ended: hands out or drops what is left.
  virtual void finish() = 0;
};

}  // namespace mixtrain::worker
