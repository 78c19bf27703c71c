// Why: the CUDA runtime calls of the CUDA backend, for the host emulation.
// Device and pinned memory are exactly-sized heap blocks, so
// AddressSanitizer sees every byte past a tensor's end; copies are memcpy,
// so overlapping copies (undefined in CUDA too) are reported. Streams and
// events are tagged heap objects that every call checks, so a destroyed
// handle is a use-after-free and a wrong one an error. Everything runs
// synchronously in call order: the emulation cannot see missing stream
// synchronization.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>

namespace {
constexpr unsigned kStreamTag = 0x57AE4u;
constexpr unsigned kEventTag = 0xE7E47u;
}  // namespace

struct CUstream_st {
  unsigned tag = kStreamTag;
};
struct CUevent_st {
  unsigned tag = kEventTag;
};

namespace {

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
  return cudaSuccess;
}
template <class Handle> cudaError_t destroy(Handle* handle) {
  if (handle == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (const cudaError_t e = check(handle); e != cudaSuccess) return e;
  handle->tag = 0;
  delete handle;
  return cudaSuccess;
}

cudaError_t allocate(void** ptr, size_t bytes) {
  *ptr = nullptr;
  if (posix_memalign(ptr, kDeviceAlignment, bytes == 0 ? 1 : bytes) != 0) {
    return fail(cudaErrorMemoryAllocation);
  }
  return cudaSuccess;
}

}  // namespace

namespace emu {
bool usable_stream(cudaStream_t stream) { return check(stream) == cudaSuccess; }
void record_launch_error(cudaError_t error) { last_error = error; }
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
    default: return "cudaErrorUnknown";
  }
}
const char* cudaGetErrorString(cudaError_t error) { return cudaGetErrorName(error); }

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice);
  switch (attribute) {
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrClockRate: *value = 1000000; break;
    default: *value = 0; break;
  }
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::strncpy(prop->name, "CUDA host emulation", sizeof prop->name - 1);
  prop->major = 9;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) { return allocate(ptr, bytes); }
cudaError_t cudaMallocHost(void** ptr, size_t bytes) { return allocate(ptr, bytes); }
cudaError_t cudaFree(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind,
                            cudaStream_t stream) {
  if (const cudaError_t e = check(stream); e != cudaSuccess) return e;
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  if (const cudaError_t e = check(stream); e != cudaSuccess) return e;
  std::memset(dst, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) { return create(stream); }
cudaError_t cudaStreamDestroy(cudaStream_t stream) { return destroy(stream); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) { return create(event); }
cudaError_t cudaEventDestroy(cudaEvent_t event) { return destroy(event); }

// Synchronizing, recording and waiting only check their handles: the work
// they would order has already run.
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t stream) { return check(stream); }
cudaError_t cudaEventSynchronize(cudaEvent_t event) { return check(event); }
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (const cudaError_t e = check(stream); e != cudaSuccess) return e;
  return check(event);
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  if (const cudaError_t e = check(stream); e != cudaSuccess) return e;
  return check(event);
}

}  // extern "C"
