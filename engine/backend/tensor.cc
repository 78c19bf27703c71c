// Why: Storage's counted lifetime and Tensor's shape bookkeeping.
#include "engine/backend/tensor.h"

#include <new>

#include "engine/common/error.h"

namespace mixtrain {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + ")";
}

namespace {

// allocator.allocate, with a failure that names what did not fit (what the
// bytes were for, and how much the pool already holds) rather than only a
// byte count or std::bad_alloc (issue 13).
void* allocate_named(Allocator& allocator, const MemoryTracker& tracker, size_t bytes,
                     MemoryPool pool, MemoryCategory category) {
  tracker.check_ram_limit(pool, category, bytes);
  try {
    return allocator.allocate(bytes, pool);
  } catch (const EngineError& e) {
    if (e.code() != ErrorCode::kOutOfMemory) throw;
    throw out_of_memory_error(tracker, bytes, pool, category, e.what());
  } catch (const std::bad_alloc&) {
    throw out_of_memory_error(tracker, bytes, pool, category, "std::bad_alloc");
  }
}

}  // namespace

Storage::Storage(std::shared_ptr<Allocator> allocator, std::shared_ptr<MemoryTracker> tracker,
                 size_t bytes, MemoryPool pool, MemoryCategory category)
    : allocator_(std::move(allocator)),
      tracker_(std::move(tracker)),
      data_(allocate_named(*allocator_, *tracker_, bytes, pool, category)),
      bytes_(bytes),
      pool_(pool),
      category_(category) {
  tracker_->on_alloc(pool_, category_, bytes_);
}

Storage::~Storage() {
  allocator_->deallocate(data_, bytes_, pool_);
  tracker_->on_free(pool_, category_, bytes_);
}

Tensor::Tensor(std::shared_ptr<Storage> storage, size_t offset_bytes, DType dtype, Shape shape)
    : storage_(std::move(storage)),
      offset_bytes_(offset_bytes),
      dtype_(dtype),
      shape_(std::move(shape)),
      numel_(shape_numel(shape_)) {
  for (int64_t d : shape_)
    MIXTRAIN_CHECK_ARG(d >= 0, "negative dimension in shape " + shape_string(shape_));
  MIXTRAIN_CHECK_ARG(storage_ != nullptr, "tensor without storage");
  MIXTRAIN_CHECK_ARG(offset_bytes_ + nbytes() <= storage_->bytes(),
                     "tensor " + describe() + " does not fit its storage of " +
                         std::to_string(storage_->bytes()) + " bytes");
}

int64_t Tensor::dim(int i) const {
  const int n = ndim();
  const int j = i < 0 ? i + n : i;
  MIXTRAIN_CHECK_ARG(j >= 0 && j < n, "dimension " + std::to_string(i) + " of " + describe());
  return shape_[j];
}

void* Tensor::data() const {
  MIXTRAIN_CHECK_ARG(defined(), "data() of an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_bytes_;
}

Tensor Tensor::view(int64_t offset, Shape shape) const {
  const int64_t n = shape_numel(shape);
  MIXTRAIN_CHECK_ARG(offset >= 0 && offset + n <= numel_,
                     "view of " + std::to_string(n) + " elements at " + std::to_string(offset) +
                         " is outside " + describe());
  return Tensor(storage_, offset_bytes_ + static_cast<size_t>(offset) * dtype_size(dtype_), dtype_,
                std::move(shape));
}

Tensor Tensor::reshape(Shape shape) const {
  MIXTRAIN_CHECK_ARG(shape_numel(shape) == numel_,
                     "cannot reshape " + describe() + " to " + shape_string(shape));
  return Tensor(storage_, offset_bytes_, dtype_, std::move(shape));
}

std::string Tensor::describe() const {
  return std::string(dtype_name(dtype_)) + shape_string(shape_);
}

}  // namespace mixtrain
