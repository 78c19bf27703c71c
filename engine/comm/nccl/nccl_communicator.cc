// Why: see nccl_communicator.h. NCCL runs in non-blocking mode
// (config.blocking = 0): calls may return ncclInProgress and
// ncclCommGetAsyncError reports progress and failures, which is what lets
// every wait here poll against a deadline and end in ncclCommAbort.
#include "engine/comm/nccl/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <thread>
#include <type_traits>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/cuda_error.h"
#include "engine/backend/device_reserve.h"
#include "engine/comm/ring.h"
#include "engine/common/error.h"
#include "engine/numerics/dtype.h"

namespace mixtrain {
namespace {

constexpr auto kPollInterval = std::chrono::microseconds(50);

ncclDataType_t nccl_float_type(DType dtype) {
  return dispatch_float(dtype, "nccl", [](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, float>) {
      return ncclFloat32;
    } else if constexpr (std::is_same_v<T, Half>) {
      return ncclFloat16;
    } else {
      return ncclBfloat16;
    }
  });
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::kSum ? ncclSum : ncclMax; }

}  // namespace

NcclCommunicator::NcclCommunicator(Store& store, int rank, int world_size, CommOptions options)
    : Communicator(rank, world_size, std::move(options)) {
  const std::string where =
      "nccl init (rank " + std::to_string(rank) + " of " + std::to_string(world_size) + ")";
  const auto deadline = std::chrono::steady_clock::now() + this->options().timeout;
  try {
    MIXTRAIN_CUDA_CHECK(cudaSetDevice(this->options().cuda_device));
    ncclUniqueId id;
    const std::string id_key = this->options().store_prefix + "/nccl_id";
    if (rank == 0) {
      const ncclResult_t rc = ncclGetUniqueId(&id);
      if (rc != ncclSuccess) {
        throw EngineError(ErrorCode::kUnavailable, where + ": " + ncclGetErrorString(rc));
      }
      store.set(id_key, std::string_view(id.internal, sizeof(id.internal)));
    } else {
      const std::string bytes = store.get(id_key, this->options().timeout);
      if (bytes.size() != sizeof(id.internal)) {
        throw EngineError(ErrorCode::kInternal, where + ": key " + id_key + " holds " +
                                                    std::to_string(bytes.size()) +
                                                    " bytes, not an ncclUniqueId");
      }
      std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    config.maxCTAs = kNcclMaxChannels;  // the channels device_reserve counts buffers for
    ncclComm_t comm = nullptr;
    const ncclResult_t rc = ncclCommInitRankConfig(&comm, world_size, id, rank, &config);
    comm_ = comm;
    if (rc != ncclSuccess && rc != ncclInProgress) {
      abort_and_throw(ErrorCode::kUnavailable, where, ncclGetErrorString(rc));
    }
    while (!poll(where, deadline)) std::this_thread::sleep_for(kPollInterval);
    MIXTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    MIXTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    MIXTRAIN_CUDA_CHECK(cudaMalloc(&barrier_word_, sizeof(int)));
    // The barrier all-reduces it: defined bytes, so compute-sanitizer's
    // initcheck stays quiet and the sum cannot overflow into garbage.
    MIXTRAIN_CUDA_CHECK(cudaMemset(barrier_word_, 0, sizeof(int)));
  } catch (...) {
    release();
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  stop();
  release();
}

void NcclCommunicator::release() {
  if (comm_ == nullptr && barrier_word_ == nullptr && done_ == nullptr && stream_ == nullptr) return;
  // The destructor may run on a thread whose current device is another
  // GPU: the communicator, its stream, event and buffer belong to ours.
  // That thread's device is given back after.
  int previous = -1;
  const bool switched = cudaGetDevice(&previous) == cudaSuccess &&
                        previous != options().cuda_device &&
                        cudaSetDevice(options().cuda_device) == cudaSuccess;
  if (comm_ != nullptr) {
    // Finalize flushes NCCL's own pending work; a peer that is gone makes
    // it hang, so past the timeout abort instead.
    const auto deadline = std::chrono::steady_clock::now() + options().timeout;
    ncclResult_t state = ncclCommFinalize(comm_);
    while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(kPollInterval);
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
    }
    if (state == ncclSuccess) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
    comm_ = nullptr;
  }
  if (barrier_word_ != nullptr) cudaFree(barrier_word_);
  if (done_ != nullptr) cudaEventDestroy(done_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  barrier_word_ = nullptr;
  done_ = nullptr;
  stream_ = nullptr;
  if (switched) cudaSetDevice(previous);
}

void NcclCommunicator::abort_and_throw(ErrorCode code, const std::string& what,
                                       const std::string& why) {
  if (comm_ != nullptr) ncclCommAbort(comm_);
  comm_ = nullptr;
  throw EngineError(code, what + ": " + why);
}

bool NcclCommunicator::poll(const std::string& what, SteadyTime deadline) {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
  if (rc != ncclSuccess) abort_and_throw(ErrorCode::kInternal, what, ncclGetErrorString(rc));
  if (state != ncclSuccess && state != ncclInProgress) {
    abort_and_throw(ErrorCode::kUnavailable, what,
                    std::string(ncclGetErrorString(state)) + " (" + ncclGetLastError(comm_) + ")");
  }
  if (std::chrono::steady_clock::now() >= deadline) {
    abort_and_throw(ErrorCode::kUnavailable, what,
                    "did not complete within " + format_seconds(options().timeout) +
                        " s (a peer died or never came); NCCL communicator aborted");
  }
  return state == ncclSuccess;
}

template <class F>
void NcclCommunicator::run_nccl(CommOp op, SteadyTime deadline, F&& launch) {
  const std::string what = comm_op_name(op);
  MIXTRAIN_CUDA_CHECK(cudaSetDevice(options().cuda_device));
  const ncclResult_t rc = launch();
  if (rc != ncclSuccess && rc != ncclInProgress) {
    abort_and_throw(ErrorCode::kInternal, what,
                    std::string(ncclGetErrorString(rc)) + " (" + ncclGetLastError(comm_) + ")");
  }
  while (!poll(what, deadline)) std::this_thread::sleep_for(kPollInterval);
  MIXTRAIN_CUDA_CHECK(cudaEventRecord(done_, stream_));
  for (;;) {
    const cudaError_t status = cudaEventQuery(done_);
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) gpu::throw_cuda_error(status, "cudaEventQuery (nccl op)");
    poll(what, deadline);
    std::this_thread::sleep_for(kPollInterval);
  }
}

void NcclCommunicator::wait_ready(const Event& ready) {
  void* event = ready.native_handle();
  if (event == nullptr) {
    Communicator::wait_ready(ready);
    return;
  }
  MIXTRAIN_CUDA_CHECK(cudaSetDevice(options().cuda_device));
  MIXTRAIN_CUDA_CHECK(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(event), 0));
}

int64_t NcclCommunicator::run_all_reduce(const Tensor& t, ReduceOp op, SteadyTime deadline) {
  run_nccl(CommOp::kAllReduce, deadline, [&] {
    return ncclAllReduce(t.data(), t.data(), t.numel(), nccl_float_type(t.dtype()), nccl_op(op),
                         comm_, stream_);
  });
  return ring_sent_elements(CommOp::kAllReduce, t.numel(), world_size(), rank(), 0);
}

int64_t NcclCommunicator::run_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op,
                                             SteadyTime deadline) {
  run_nccl(CommOp::kReduceScatter, deadline, [&] {
    return ncclReduceScatter(in.data(), out.data(), out.numel(), nccl_float_type(in.dtype()),
                             nccl_op(op), comm_, stream_);
  });
  return ring_sent_elements(CommOp::kReduceScatter, in.numel(), world_size(), rank(), 0);
}

int64_t NcclCommunicator::run_all_gather(const Tensor& in, const Tensor& out, SteadyTime deadline) {
  // Pure data movement: bytes whatever the dtype.
  run_nccl(CommOp::kAllGather, deadline, [&] {
    return ncclAllGather(in.data(), out.data(), in.nbytes(), ncclInt8, comm_, stream_);
  });
  return ring_sent_elements(CommOp::kAllGather, out.numel(), world_size(), rank(), 0);
}

int64_t NcclCommunicator::run_broadcast(const Tensor& t, int root, SteadyTime deadline) {
  run_nccl(CommOp::kBroadcast, deadline, [&] {
    return ncclBroadcast(t.data(), t.data(), t.nbytes(), ncclInt8, root, comm_, stream_);
  });
  return ring_sent_elements(CommOp::kBroadcast, t.numel(), world_size(), rank(), root);
}

int64_t NcclCommunicator::run_barrier(SteadyTime deadline) {
  run_nccl(CommOp::kBarrier, deadline, [&] {
    return ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, comm_, stream_);
  });
  return ring_sent_elements(CommOp::kBarrier, 0, world_size(), rank(), 0);
}

}  // namespace mixtrain
