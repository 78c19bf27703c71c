// Why: the CPU backend's memory, copies and (trivial) stream ordering.
#include "engine/backend/cpu/cpu_backend.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "engine/backend/cpu/cpu_gemm.h"

namespace mixtrain {
namespace {

// Two heaps from the same malloc; the pool only decides where it is counted.
class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() {
    // Ops allocate and free megabyte workspaces every call. glibc would
    // serve those with fresh mmaps and hand them back at once, so every
    // call page-faults its workspace in again (thousands of faults per
    // GEMM). Keeping blocks up to 32 MiB on the heap lets malloc reuse them.
    static std::once_flag once;
    std::call_once(once, [] {
      mallopt(M_MMAP_THRESHOLD, 32 << 20);
      mallopt(M_TRIM_THRESHOLD, 256 << 20);
    });
  }

  void* allocate(size_t bytes, MemoryPool pool) override {
    (void)pool;
    // aligned_alloc needs a size that is a multiple of the alignment.
    const size_t rounded = ((bytes + 63) / 64) * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (p == nullptr) {
      throw EngineError(ErrorCode::kOutOfMemory,
                        "cpu: cannot allocate " + std::to_string(bytes) + " bytes");
    }
    return p;
  }
  void deallocate(void* ptr, size_t, MemoryPool) override { std::free(ptr); }
  DeviceType device_type(MemoryPool) const override { return DeviceType::kCpu; }
};

// CPU ops finish before they return: every event has already happened.
class CpuEvent final : public Event {
 public:
  void wait() const override {}
};

}  // namespace

CpuBackend::CpuBackend()
    : Backend(std::make_shared<CpuAllocator>()), gemm_(std::make_unique<CpuGemm>(*this)) {}

CpuBackend::~CpuBackend() = default;

bool CpuBackend::gemm_runs_without_staging(DType type) { return gemm_->runs_without_staging(type); }

void CpuBackend::do_copy(const Tensor& dst, const Tensor& src, StreamKind) {
  if (dst.data() != src.data()) std::memmove(dst.data(), src.data(), src.nbytes());
}

void CpuBackend::copy_from_host(const Tensor& dst, const void* src) {
  std::memcpy(dst.data(), src, dst.nbytes());
}

void CpuBackend::copy_to_host(void* dst, const Tensor& src) {
  std::memcpy(dst, src.data(), src.nbytes());
}

std::unique_ptr<Event> CpuBackend::record_event(StreamKind) { return std::make_unique<CpuEvent>(); }

void CpuBackend::wait_event(StreamKind, const Event&) {}

}  // namespace mixtrain
