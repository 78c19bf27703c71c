// Why: the engine's one tensor type. A Tensor is a dtype, a shape and a
// view into reference-counted Storage that a Backend allocated with a
// memory category and pool; the Storage un-counts itself from the tracker
// when its last Tensor goes, so the tracker can never drift from reality.
// Tensors are always contiguous and row-major; shapes read (B,T,C).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/memory_tracker.h"
#include "engine/numerics/dtype.h"

namespace mixtrain {

enum class DeviceType { kCpu, kCuda };

using Shape = std::vector<int64_t>;

// Number of elements of a shape (1 for the empty shape).
int64_t shape_numel(const Shape& shape);
// "(8, 256, 384)".
std::string shape_string(const Shape& shape);

// Raw memory source of one backend. Implementations allocate from the
// device or the host pool and must be thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns at least `bytes` bytes (64-byte aligned) from `pool`, or throws
  // EngineError(kOutOfMemory) naming the size.
  virtual void* allocate(size_t bytes, MemoryPool pool) = 0;
  // Returns memory obtained from allocate(bytes, pool).
  virtual void deallocate(void* ptr, size_t bytes, MemoryPool pool) = 0;
  // Where memory of `pool` lives: kCpu memory is readable by host code.
  virtual DeviceType device_type(MemoryPool pool) const = 0;
};

// One allocation, counted in `tracker` for its lifetime.
class Storage {
 public:
  Storage(std::shared_ptr<Allocator> allocator, std::shared_ptr<MemoryTracker> tracker,
          size_t bytes, MemoryPool pool, MemoryCategory category);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  MemoryPool pool() const { return pool_; }
  MemoryCategory category() const { return category_; }
  DeviceType device_type() const { return allocator_->device_type(pool_); }

 private:
  std::shared_ptr<Allocator> allocator_;
  std::shared_ptr<MemoryTracker> tracker_;
  void* data_;
  size_t bytes_;
  MemoryPool pool_;
  MemoryCategory category_;
};

// A handle: copying a Tensor shares its storage (like torch.Tensor).
// Constness is shallow: a const Tensor still gives a writable data().
class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Storage> storage, size_t offset_bytes, DType dtype, Shape shape);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  // Size of dimension i; negative i counts from the end.
  int64_t dim(int i) const;
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }

  void* data() const;
  // data() as T*; throws EngineError(kInvalidArgument) unless T matches dtype().
  template <class T> T* data_as() const {
    MIXTRAIN_CHECK_ARG(dtype_of<T>() == dtype_, std::string("tensor of dtype ") + dtype_name(dtype_) +
                                           " read as " + dtype_name(dtype_of<T>()));
    return static_cast<T*>(data());
  }

  DeviceType device_type() const { return storage_->device_type(); }
  MemoryPool pool() const { return storage_->pool(); }
  MemoryCategory category() const { return storage_->category(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Elements [offset, offset + shape_numel(shape)) of this tensor's flat
  // elements, with `shape`. Throws if the range is outside this tensor.
  Tensor view(int64_t offset, Shape shape) const;
  // The same elements with another shape of equal numel.
  Tensor reshape(Shape shape) const;
  // "bf16(8, 256, 384)".
  std::string describe() const;

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  DType dtype_ = DType::kF32;
  Shape shape_;
  int64_t numel_ = 0;
};

}  // namespace mixtrain
