// Why: the CUDA backend's device setup (its memory and two streams come
// from CudaMemory, cuda_memory.h), events, the copies, the op scratch
// workspace, and the entry points the registry calls.
#include "engine/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <iostream>

#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/cuda_error.h"
#include "engine/backend/cuda/cuda_memory.h"

namespace mixtrain {
namespace {

// Raw byte buffers are tensors of a one-byte dtype; which one is irrelevant.
constexpr DType kByteDType = DType::kFP8E4M3;

class CudaEvent final : public Event {
 public:
  explicit CudaEvent(cudaStream_t stream) {
    MIXTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    const cudaError_t status = cudaEventRecord(event_, stream);
    if (status != cudaSuccess) {
      (void)cudaEventDestroy(event_);
      gpu::throw_cuda_error(status, "cudaEventRecord(event_, stream)");
    }
  }
  ~CudaEvent() override { (void)cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }
  void wait() const override { MIXTRAIN_CUDA_CHECK(cudaEventSynchronize(event_)); }
  void* native_handle() const override { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// 90 for sm_90.
int compute_capability(int device) {
  int major = 0, minor = 0;
  MIXTRAIN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  MIXTRAIN_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major * 10 + minor;
}

}  // namespace

void CudaBackend::CublasDeleter::operator()(cublasHandle_t handle) const {
  (void)cublasDestroy(handle);
}

void CudaBackend::CublasDeleter::operator()(cublasLtHandle_t handle) const {
  (void)cublasLtDestroy(handle);
}

CudaBackend::CudaBackend(int device) : CudaBackend(std::make_shared<CudaMemory>(device)) {}

CudaBackend::CudaBackend(std::shared_ptr<CudaMemory> memory)
    : Backend(memory),
      memory_(std::move(memory)),
      device_(memory_->device()),
      compute_capability_(compute_capability(device_)) {
  const cudaStream_t compute = memory_->compute();
  cublasHandle_t handle = nullptr;
  MIXTRAIN_CUBLAS_CHECK(cublasCreate(&handle));
  cublas_.reset(handle);
  MIXTRAIN_CUBLAS_CHECK(cublasSetStream(handle, compute));
  // FP32 GEMMs stay true FP32 (no TF32), like the CPU backend.
  MIXTRAIN_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));

  const size_t workspace_bytes = cublas_workspace_bytes(compute_capability_);
  cublas_workspace_ =
      empty({static_cast<int64_t>(workspace_bytes)}, kByteDType, MemoryCategory::kWorkspace);
  MIXTRAIN_CUBLAS_CHECK(
      cublasSetWorkspace(handle, cublas_workspace_.data(), cublas_workspace_.nbytes()));
  cublasLtHandle_t lt = nullptr;
  MIXTRAIN_CUBLAS_CHECK(cublasLtCreate(&lt));
  cublas_lt_.reset(lt);
}

CudaBackend::~CudaBackend() {
  (void)cudaSetDevice(device_);
  (void)cudaDeviceSynchronize();
}

cudaStream_t CudaBackend::begin_op() {
  MIXTRAIN_CUDA_CHECK(cudaSetDevice(device_));
  return memory_->compute();
}

cudaStream_t CudaBackend::stream(StreamKind kind) const {
  return kind == StreamKind::kCompute ? memory_->compute() : memory_->transfer();
}

void CudaBackend::do_copy(const Tensor& dst, const Tensor& src, StreamKind stream_kind) {
  MIXTRAIN_CUDA_CHECK(cudaSetDevice(device_));
  if (dst.data() == src.data() || src.nbytes() == 0) return;
  MIXTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDefault,
                                      stream(stream_kind)));
  // Device frees wait for this copy. Said only once it is enqueued: a free
  // on another thread (the communicator's) that took the note before the
  // copy was on the stream would fence in front of it, and the later free
  // of this copy's own buffer would then not wait for it (issue 31).
  if (stream_kind == StreamKind::kTransfer &&
      (dst.pool() == MemoryPool::kDevice || src.pool() == MemoryPool::kDevice)) {
    memory_->note_transfer_use();
  }
}

void CudaBackend::copy_from_host(const Tensor& dst, const void* src) {
  const cudaStream_t compute = begin_op();
  if (dst.nbytes() == 0) return;
  // On the compute stream, so the copy lands after every op already
  // enqueued that may still read dst.
  MIXTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src, dst.nbytes(), cudaMemcpyDefault, compute));
  MIXTRAIN_CUDA_CHECK(cudaStreamSynchronize(compute));
}

void CudaBackend::copy_to_host(void* dst, const Tensor& src) {
  const cudaStream_t compute = begin_op();
  if (src.nbytes() == 0) return;
  MIXTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst, src.data(), src.nbytes(), cudaMemcpyDefault, compute));
  MIXTRAIN_CUDA_CHECK(cudaStreamSynchronize(compute));
}

std::unique_ptr<Event> CudaBackend::record_event(StreamKind stream_kind) {
  MIXTRAIN_CUDA_CHECK(cudaSetDevice(device_));
  return std::make_unique<CudaEvent>(stream(stream_kind));
}

void CudaBackend::wait_event(StreamKind stream_kind, const Event& event) {
  const auto* cuda_event = dynamic_cast<const CudaEvent*>(&event);
  MIXTRAIN_CHECK_ARG(cuda_event != nullptr,
                     "wait_event: the event was not recorded by a CUDA backend");
  MIXTRAIN_CUDA_CHECK(cudaSetDevice(device_));
  MIXTRAIN_CUDA_CHECK(cudaStreamWaitEvent(stream(stream_kind), cuda_event->get(), 0));
}

void CudaBackend::synchronize() {
  MIXTRAIN_CUDA_CHECK(cudaSetDevice(device_));
  MIXTRAIN_CUDA_CHECK(cudaStreamSynchronize(memory_->compute()));
  MIXTRAIN_CUDA_CHECK(cudaStreamSynchronize(memory_->transfer()));
}

void CudaBackend::do_set_zero(const Tensor& t) {
  const cudaStream_t compute = begin_op();
  if (t.nbytes() == 0) return;
  if (t.storage()->pool() == MemoryPool::kHost) {
    // Host code (CPU Adam on offloaded states) reads pinned tensors right
    // after zeros(); a memset queued on the stream could land after that.
    // Work already queued may still use the bytes, so it finishes first.
    synchronize();
    std::memset(t.data(), 0, t.nbytes());
    return;
  }
  MIXTRAIN_CUDA_CHECK(cudaMemsetAsync(t.data(), 0, t.nbytes(), compute));
}

std::vector<Tensor> CudaBackend::scratch(const std::vector<ScratchRequest>& requests) {
  const std::vector<size_t> offsets = scratch_offsets(requests);
  const size_t total = offsets.back();
  if (!scratch_.defined() || scratch_.nbytes() < total) {
    // The old buffer goes back to the pool before the larger one is taken:
    // its free is ordered on the compute stream after every op that used it
    // (no op holds its buffers past the next scratch() call), so the pool
    // may hand its memory out again at once. The workspace's peak is then
    // cuBLAS's and the largest scratch, as the planner counts it.
    scratch_ = Tensor();
    scratch_ = empty({static_cast<int64_t>(scratch_buffer_bytes(total))}, kByteDType,
                     MemoryCategory::kWorkspace);
  }
  std::vector<Tensor> buffers;
  size_t i = 0;
  for (const ScratchRequest& r : requests) {
    buffers.emplace_back(scratch_.storage(), offsets[i++], r.dtype, r.shape);
  }
  return buffers;
}

namespace {

// The runtime's answer to "which devices are there", asked once: the CUDA
// runtime settles it at its initialisation anyway. When there is none, why
// is said once on stderr, so `auto` never becomes the CPU silently.
struct DeviceQuery {
  int count = 0;
  std::string unavailable;  // why count is 0
};

const DeviceQuery& device_query() {
  static const DeviceQuery query = [] {
    DeviceQuery q;
    const cudaError_t status = cudaGetDeviceCount(&q.count);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      q.count = 0;
      q.unavailable = std::string(cudaGetErrorString(status)) + " (" + cudaGetErrorName(status) + ")";
    } else if (q.count == 0) {
      q.unavailable = "the CUDA driver lists no device";
    }
    if (!q.unavailable.empty()) std::cerr << "mixtrain: no usable CUDA device: " << q.unavailable << "\n";
    return q;
  }();
  return query;
}

}  // namespace

int cuda_device_count() { return device_query().count; }

std::string cuda_unavailable_reason() { return device_query().unavailable; }

std::string cuda_driver_version() {
  int version = 0;
  if (cudaDriverGetVersion(&version) != cudaSuccess || version == 0) {
    (void)cudaGetLastError();
    return "";
  }
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

CudaDeviceInfo cuda_device_info(int device) {
  CudaDeviceInfo out;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return out;
  }
  out.name = prop.name;
  out.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  out.compute_capability_major = prop.major;
  out.compute_capability_minor = prop.minor;
  out.multiprocessors = prop.multiProcessorCount;
  // CUDA 13 dropped cudaDeviceProp::clockRate; the attribute remains.
  if (cudaDeviceGetAttribute(&out.clock_khz, cudaDevAttrClockRate, device) != cudaSuccess) {
    (void)cudaGetLastError();
    out.clock_khz = 0;
  }
  return out;
}

OpSupport CudaBackend::supports(BackendOp op, std::span<const DType>) const {
  if (op != BackendOp::kMatmulFp8 || compute_capability_ >= 89) return {};
  return {false, name() + " (" + cuda_device_info(device_).name + ", sm_" +
                     std::to_string(compute_capability_) +
                     ") has no fp8 tensor cores; compute fp8 needs sm_89 or newer (Ada, Hopper, "
                     "Blackwell)"};
}

std::unique_ptr<Backend> make_cuda_backend(int device) {
  const int count = cuda_device_count();
  if (device < 0 || device >= count) {
    throw EngineError(ErrorCode::kUnavailable, "cuda:" + std::to_string(device) + ": " +
                                                   std::to_string(count) +
                                                   " CUDA device(s) present");
  }
  return std::make_unique<CudaBackend>(device);
}

}  // namespace mixtrain
