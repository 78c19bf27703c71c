// Why: the CUDA runtime calls of the CUDA backend, for the host emulation.
// Device and pinned memory are exactly-sized heap blocks, so
// AddressSanitizer sees every byte past a tensor's end; copies are memcpy,
// so overlapping copies (undefined in CUDA too) are reported. Streams and
// events are tagged heap objects that every call checks, so a destroyed
// handle is a use-after-free and a wrong one an error. Work on a stream
// (kernels, copies, memsets, stream-ordered frees, cuBLAS) waits in the
// stream's queue until something waits for it (stream_queues.h), so a
// missing synchronisation shows as stale data or a use after free. Copies
// from pageable host memory take their bytes at the call and copies to it
// finish before the call returns, as CUDA's do. The stub also counts the
// calls that block and logs the ones that order streams (runtime_calls.h).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime_calls.h"
#include "stream_queues.h"

namespace {
constexpr unsigned kStreamTag = 0x57AE4u;
constexpr unsigned kEventTag = 0xE7E47u;
}  // namespace

struct CUstream_st {
  unsigned tag = kStreamTag;
  int id = 0;
  emu::StreamQueue queue;
};
struct CUevent_st {
  unsigned tag = kEventTag;
  int id = 0;
  emu::QueueMark recorded;  // what the event waits for; passed when never recorded
};
struct CUmemPoolHandle_st {
  int device = 0;
};

namespace {

std::mutex calls_mu;
emu::RuntimeCalls calls;  // guarded by calls_mu
bool events_held = false;  // guarded by calls_mu
emu::DeviceMemory device_memory = emu::DeviceMemory::kRoom;  // guarded by calls_mu
std::function<void()> before_memcpy;                         // guarded by calls_mu
int next_handle_id = 1;    // guarded by calls_mu
CUmemPoolHandle_st default_pool;

void count(int emu::RuntimeCalls::*counter) {
  std::lock_guard lock(calls_mu);
  ++(calls.*counter);
}
void log_order(const std::string& entry) {
  std::lock_guard lock(calls_mu);
  calls.stream_order.push_back(entry);
}
std::string name_of(cudaStream_t stream) {
  return stream == nullptr ? "s0" : "s" + std::to_string(stream->id);
}

thread_local cudaError_t last_error = cudaSuccess;
constexpr size_t kDeviceAlignment = 256;  // cudaMalloc's

cudaError_t fail(cudaError_t error) {
  last_error = error;
  return error;
}

// Reads the handle's tag (ASan reports a destroyed handle). The legacy
// default stream, nullptr, is valid.
cudaError_t check(cudaStream_t stream) {
  return stream == nullptr || stream->tag == kStreamTag ? cudaSuccess
                                                        : fail(cudaErrorInvalidResourceHandle);
}
cudaError_t check(cudaEvent_t event) {
  return event != nullptr && event->tag == kEventTag ? cudaSuccess
                                                     : fail(cudaErrorInvalidResourceHandle);
}

template <class Handle> cudaError_t create(Handle** handle) {
  *handle = new Handle;
  std::lock_guard lock(calls_mu);
  (*handle)->id = next_handle_id++;
  return cudaSuccess;
}
template <class Handle> cudaError_t destroy(Handle* handle) {
  if (handle == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (const cudaError_t e = check(handle); e != cudaSuccess) return e;
  handle->tag = 0;
  delete handle;
  return cudaSuccess;
}

emu::StreamQueue* queue_of(cudaStream_t stream) {
  return stream == nullptr ? nullptr : &stream->queue;
}

// The blocks of device and pinned memory (start -> size): what the GPU
// can reach. Anything else is pageable host memory.
std::mutex blocks_mu;
std::map<uintptr_t, size_t> blocks;  // guarded by blocks_mu

bool gpu_reachable(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  std::lock_guard lock(blocks_mu);
  auto it = blocks.upper_bound(address);
  if (it == blocks.begin()) return false;
  --it;
  return address < it->first + std::max<size_t>(it->second, 1);
}

cudaError_t allocate(void** ptr, size_t bytes) {
  *ptr = nullptr;
  if (posix_memalign(ptr, kDeviceAlignment, bytes == 0 ? 1 : bytes) != 0) {
    return fail(cudaErrorMemoryAllocation);
  }
  std::lock_guard lock(blocks_mu);
  blocks[reinterpret_cast<uintptr_t>(*ptr)] = bytes;
  return cudaSuccess;
}

void release(void* ptr) {
  {
    std::lock_guard lock(blocks_mu);
    blocks.erase(reinterpret_cast<uintptr_t>(ptr));
  }
  std::free(ptr);
}

}  // namespace

namespace emu {
bool usable_stream(cudaStream_t stream) { return check(stream) == cudaSuccess; }
void record_launch_error(cudaError_t error) { last_error = error; }
void enqueue_on(cudaStream_t stream, std::function<void()> work) {
  enqueue(queue_of(stream), std::move(work));
}

int compute_capability() {
  const char* value = std::getenv("MIXTRAIN_EMULATED_SM");
  return value != nullptr ? std::atoi(value) : 90;
}

RuntimeCalls runtime_calls() {
  std::lock_guard lock(calls_mu);
  return calls;
}
void count_lt_matmul(bool fp8) {
  count(&emu::RuntimeCalls::lt_matmuls);
  if (fp8) count(&emu::RuntimeCalls::lt_fp8_matmuls);
}
void count_lt_heuristic() { count(&emu::RuntimeCalls::lt_heuristics); }
void hold_events(bool held) {
  std::lock_guard lock(calls_mu);
  events_held = held;
}
void set_device_memory(DeviceMemory state) {
  std::lock_guard lock(calls_mu);
  device_memory = state;
}
void before_next_memcpy(std::function<void()> other_thread_work) {
  std::lock_guard lock(calls_mu);
  before_memcpy = std::move(other_thread_work);
}
std::string stream_name(cudaStream_t stream) { return name_of(stream); }
}  // namespace emu

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}
cudaError_t cudaGetLastError() {
  const cudaError_t error = last_error;
  last_error = cudaSuccess;
  return error;
}
const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    default: return "cudaErrorUnknown";
  }
}
const char* cudaGetErrorString(cudaError_t error) { return cudaGetErrorName(error); }

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice);
  switch (attribute) {
    case cudaDevAttrComputeCapabilityMajor:
      *value = emu::compute_capability() / 10;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = emu::compute_capability() % 10;
      break;
    case cudaDevAttrClockRate: *value = 1000000; break;
    case cudaDevAttrMemoryPoolsSupported: *value = 1; break;
    default: *value = 0; break;
  }
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::strncpy(prop->name, "CUDA host emulation", sizeof prop->name - 1);
  prop->major = emu::compute_capability() / 10;
  prop->minor = emu::compute_capability() % 10;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) { return allocate(ptr, bytes); }
cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  count(&emu::RuntimeCalls::pinned_allocations);
  return allocate(ptr, bytes);
}
// cudaFree and cudaFreeHost wait for the whole device on a GPU.
cudaError_t cudaFree(void* ptr) {
  count(&emu::RuntimeCalls::blocking_frees);
  emu::drain_all();
  release(ptr);
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* ptr) {
  count(&emu::RuntimeCalls::blocking_frees);
  emu::drain_all();
  release(ptr);
  return cudaSuccess;
}

// The stream-ordered pool: exact heap blocks too, freed when the stream
// reaches the free, so a later use is an ASan use-after-free.
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream) {
  if (const cudaError_t e = check(stream); e != cudaSuccess) return e;
  {
    std::lock_guard lock(calls_mu);
    if (device_memory != emu::DeviceMemory::kRoom) return fail(cudaErrorMemoryAllocation);
  }
  count(&emu::RuntimeCalls::pool_allocations);
  return allocate(ptr, bytes);
}
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  if (const cudaError_t e = check(stream); e != cudaSuccess) return e;
  count(&emu::RuntimeCalls::pool_frees);
  log_order("free on " + name_of(stream));
  emu::enqueue(queue_of(stream), [ptr] { release(ptr); });
  return cudaSuccess;
}
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice);
  *pool = &default_pool;
  return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attribute, void* value) {
  if (pool != &default_pool || value == nullptr) return fail(cudaErrorInvalidValue);
  if (attribute == cudaMemPoolAttrReleaseThreshold) {
    std::lock_guard lock(calls_mu);
    calls.pool_release_threshold = *static_cast<const uint64_t*>(value);
  }
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = emu::kDeviceMemoryBytes;
  *total_bytes = emu::kDeviceMemoryBytes;
  return cudaSuccess;
}
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t) {
  if (pool != &default_pool) return fail(cudaErrorInvalidValue);
  std::lock_guard lock(calls_mu);
  ++calls.pool_trims;
  if (device_memory == emu::DeviceMemory::kPoolHoldsIt) device_memory = emu::DeviceMemory::kRoom;
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind,
                            cudaStream_t stream) {
  if (const cudaError_t e = check(stream); e != cudaSuccess) return e;
  std::function<void()> interleaved;
  {
    std::lock_guard lock(calls_mu);
    interleaved.swap(before_memcpy);
  }
  if (interleaved) interleaved();
  if (!gpu_reachable(dst)) {  // into pageable memory: done on return
    emu::drain(emu::mark(queue_of(stream)));
    std::memcpy(dst, src, bytes);
  } else if (!gpu_reachable(src)) {  // from pageable memory: its bytes now
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                      static_cast<const char*>(src) + bytes);
    emu::enqueue(queue_of(stream), [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
  } else {
    emu::enqueue(queue_of(stream), [dst, src, bytes] { std::memcpy(dst, src, bytes); });
  }
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  if (const cudaError_t e = check(stream); e != cudaSuccess) return e;
  emu::enqueue(queue_of(stream), [dst, value, bytes] { std::memset(dst, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  const cudaError_t created = create(stream);
  emu::add_queue(&(*stream)->queue);
  return created;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (const cudaError_t e = check(stream); e != cudaSuccess || stream == nullptr) {
    return stream == nullptr ? fail(cudaErrorInvalidResourceHandle) : e;
  }
  emu::remove_queue(&stream->queue);  // its work runs first, as on a GPU
  return destroy(stream);
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) { return create(event); }
cudaError_t cudaEventDestroy(cudaEvent_t event) { return destroy(event); }

// Synchronisations run the queues they wait for; recording marks a point
// in a queue, and a wait queues the draining of that point.
cudaError_t cudaDeviceSynchronize() {
  count(&emu::RuntimeCalls::device_synchronizations);
  emu::drain_all();
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (const cudaError_t e = check(stream); e != cudaSuccess) return e;
  count(&emu::RuntimeCalls::stream_synchronizations);
  if (stream == nullptr) {
    emu::drain_all();
  } else {
    emu::drain(emu::mark(&stream->queue));
  }
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (const cudaError_t e = check(event); e != cudaSuccess) return e;
  emu::drain(event->recorded);
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (const cudaError_t e = check(event); e != cudaSuccess) return e;
  {
    std::lock_guard lock(calls_mu);
    if (events_held) return cudaErrorNotReady;  // not an error: not recorded
  }
  return emu::passed(event->recorded) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (const cudaError_t e = check(stream); e != cudaSuccess) return e;
  if (const cudaError_t e = check(event); e != cudaSuccess) return e;
  log_order("record e" + std::to_string(event->id) + " on " + name_of(stream));
  if (stream == nullptr) emu::drain_all();
  event->recorded = emu::mark(queue_of(stream));
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  if (const cudaError_t e = check(stream); e != cudaSuccess) return e;
  if (const cudaError_t e = check(event); e != cudaSuccess) return e;
  log_order(name_of(stream) + " waits e" + std::to_string(event->id));
  emu::enqueue(queue_of(stream), [recorded = event->recorded] { emu::drain(recorded); });
  return cudaSuccess;
}

}  // extern "C"
