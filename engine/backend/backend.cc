// Why: tensor creation shared by all backends (the registry that makes
// them is backend_registry.cc, so code that only handles tensors links
// no backend's kernels).
#include "engine/backend/backend.h"

namespace mixtrain {

Tensor Backend::empty(const Shape& shape, DType dtype, MemoryCategory category,
                      MemoryPool pool) {
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  auto storage = std::make_shared<Storage>(allocator_, tracker_, bytes, pool, category);
  return Tensor(std::move(storage), 0, dtype, shape);
}

Tensor Backend::zeros(const Shape& shape, DType dtype, MemoryCategory category,
                      MemoryPool pool) {
  Tensor t = empty(shape, dtype, category, pool);
  set_zero(t);
  return t;
}

}  // namespace mixtrain
