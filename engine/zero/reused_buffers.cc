// Why: see reused_buffers.h.
#include "engine/zero/reused_buffers.h"

#include <utility>

namespace mixtrain {

ReusedBuffers::ReusedBuffers(Backend& backend, DType dtype, MemoryCategory category)
    : backend_(backend), dtype_(dtype), category_(category) {}

void ReusedBuffers::reserve(const std::vector<int64_t>& sizes) {
  for (const int64_t numel : sizes) give_back(backend_.empty({numel}, dtype_, category_));
}

Tensor ReusedBuffers::take(int64_t numel) {
  std::vector<Tensor>& spare = spare_[numel];
  if (spare.empty()) return backend_.empty({numel}, dtype_, category_);
  Tensor buffer = std::move(spare.back());
  spare.pop_back();
  return buffer;
}

void ReusedBuffers::give_back(Tensor buffer) {
  if (!buffer.defined()) return;
  spare_[buffer.numel()].push_back(std::move(buffer));
}

}  // namespace mixtrain
