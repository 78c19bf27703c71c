// Why: collectives on CUDA tensors between GPUs, through NCCL from the CUDA
// toolkit, behind the same Communicator interface and counters as Gloo.
// Rank 0's ncclUniqueId travels through the Store. The communicator is
// non-blocking: each op is enqueued on the communicator's own stream and
// polled until it completes, fails, or passes its deadline, when the NCCL
// communicator is aborted so nothing waits forever on a dead peer.
// Compiled only when the CUDA backend and NCCL are present.
#pragma once

#include <cstdint>
#include <string>

#include "engine/comm/communicator.h"
#include "engine/comm/store.h"

// NCCL and CUDA handle types, so this header needs no CUDA include path.
struct ncclComm;
struct CUstream_st;
struct CUevent_st;

namespace mixtrain {

class NcclCommunicator final : public Communicator {
 public:
  // Joins the world_size ranks that use `store` with the same
  // options.store_prefix on CUDA device options.cuda_device: rank 0
  // publishes the NCCL unique id, every rank initializes NCCL within
  // options.timeout. `store` must outlive the call. Throws
  // EngineError(kUnavailable) when a peer does not come or NCCL fails.
  NcclCommunicator(Store& store, int rank, int world_size, CommOptions options = {});
  ~NcclCommunicator() override;

  const char* backend_name() const override { return "nccl"; }
  DeviceType device_type() const override { return DeviceType::kCuda; }

 protected:
  // Tensors must be ready when the op is submitted (the caller has
  // synchronized the stream that wrote them); an op is done once its
  // result is in device memory. Sent elements are the ring counts of
  // ring.h, whatever algorithm NCCL picks.
  int64_t run_all_reduce(const Tensor& t, ReduceOp op, SteadyTime deadline) override;
  int64_t run_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op,
                             SteadyTime deadline) override;
  int64_t run_all_gather(const Tensor& in, const Tensor& out, SteadyTime deadline) override;
  int64_t run_broadcast(const Tensor& t, int root, SteadyTime deadline) override;
  int64_t run_barrier(SteadyTime deadline) override;
  // NCCL's stream waits for a CUDA event; no thread blocks.
  void wait_ready(const Event& ready) override;

 private:
  // Enqueues one NCCL call (`launch` makes it and returns its
  // ncclResult_t), then waits for the stream until `deadline`, aborting the
  // communicator on failure.
  template <class F>
  void run_nccl(CommOp op, SteadyTime deadline, F&& launch);
  // Checks the communicator's async state once: true when no call is in
  // progress. Aborts and throws EngineError naming `what` on an NCCL error
  // or once `deadline` passed.
  bool poll(const std::string& what, SteadyTime deadline);
  // Finalizes (or, when that cannot finish, aborts) the NCCL communicator
  // and frees the stream, event and barrier word.
  void release();
  // Aborts the NCCL communicator and throws EngineError(code) "<what>: <why>".
  [[noreturn]] void abort_and_throw(ErrorCode code, const std::string& what,
                                    const std::string& why);

  ncclComm* comm_ = nullptr;  // null once aborted
  CUstream_st* stream_ = nullptr;
  CUevent_st* done_ = nullptr;
  int* barrier_word_ = nullptr;  // 4 device bytes the barrier all-reduces
};

}  // namespace mixtrain
