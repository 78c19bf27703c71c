// Why: see zero_context.h.
#include "engine/zero/zero_context.h"

#include <string>

#include "engine/common/error.h"

namespace mixtrain {

ReadyEvent ZeroContext::inputs_ready() const {
  // A GPU backend's ops run asynchronously on its compute stream; the
  // communicator reads and writes the buffers from its own stream, which
  // waits for everything enqueued so far (the outputs' allocations too).
  if (backend.device_type() == DeviceType::kCpu) return nullptr;
  return backend.record_event(StreamKind::kCompute);
}

CommHandle ZeroContext::all_gather(const Tensor& chunk, const Tensor& out) const {
  if (comm == nullptr) {
    backend.copy(out, chunk);
    return CommHandle();
  }
  // The communicator reaches only the device pool: a GPU backend's
  // host-pool chunk goes through a device copy, which inputs_ready() covers.
  Tensor input = chunk;
  if (backend.device_type() != DeviceType::kCpu && chunk.pool() != MemoryPool::kDevice) {
    input = allocate(chunk.numel(), chunk.dtype(), MemoryCategory::kCommBuffers);
    backend.copy(input, chunk);
  }
  return comm->all_gather_async(input, out, inputs_ready());
}

Tensor ZeroContext::allocate(int64_t numel, DType dtype, MemoryCategory category,
                             MemoryPool pool) const {
  return backend.zeros({numel}, dtype, category, pool);
}

Tensor ZeroContext::unit_view(const std::vector<Tensor>& per_unit, const ParameterInfo& info,
                              const char* what) const {
  const Tensor& buffer = per_unit[info.unit];
  if (!buffer.defined())
    throw EngineError(ErrorCode::kInternal, "ZeroEngine: " + info.name + " used while its " +
                                                std::string(what) + " is not acquired");
  return buffer.view(info.offset - layout.units()[info.unit].offset, info.shape);
}

}  // namespace mixtrain
