// Why: data-parallel training (ZeRO stages 0-3) needs all-reduce,
// reduce-scatter, all-gather and broadcast of flat buffers between ranks,
// on CPU tensors (Gloo over TCP) and CUDA tensors (NCCL), behind one
// interface. Every op can run asynchronously on the communicator's own
// thread, in submission order, so gradient buckets travel while backward
// computes the next ones; every op has a deadline, so a dead peer turns
// into an error naming it instead of a hang; and every op is counted, so
// the summary's comm_elements_per_step is measured, not estimated.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/backend/memory_tracker.h"
#include "engine/backend/tensor.h"
#include "engine/comm/comm_stats.h"
#include "engine/socket/socket_io.h"

namespace mixtrain {

class Event;  // backend/backend.h

// Reductions are computed in fp32 and rounded to the tensor's dtype once
// per ring hop, as NCCL's ring does. Gloo's kMax lets a NaN win; NCCL's may
// not, so reduce overflow flags (0/1), not raw values, with it.
enum class ReduceOp { kSum, kMax };

struct CommOptions {
  // Each collective must finish within this long after it starts running;
  // past it, it fails with EngineError(kUnavailable) naming the peer.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  // This communicator's store keys start with "<store_prefix>/";
  // communicators sharing a store need different prefixes.
  std::string store_prefix = "comm";
  // Gloo: the address to bind and advertise to peers, or a network
  // interface name (used instead when set).
  std::string hostname = "127.0.0.1";
  std::string iface;
  // Gloo: when set, its staging buffers are counted here as
  // (device, comm_buffers).
  std::shared_ptr<MemoryTracker> memory;
  // NCCL: the CUDA device holding this rank's tensors.
  int cuda_device = 0;
};

// What an op waits for before it reads its inputs: an event recorded on the
// compute stream after the work that writes them. GPU communicators make
// their own stream wait for it (no thread blocks); host ones wait for it
// on their thread. Null: the inputs are ready now.
using ReadyEvent = std::shared_ptr<const Event>;

// Completion of one asynchronous collective.
class CommHandle {
 public:
  // A handle to nothing, already done.
  CommHandle() = default;
  // Blocks until the op finished; rethrows its EngineError if it failed.
  // May be called more than once.
  void wait() const;
  // Whether the op finished (either way); never blocks.
  bool done() const;

 private:
  friend class Communicator;
  struct State {
    mutable std::mutex mu;
    std::condition_variable finished;
    bool done = false;         // GUARDED_BY(mu)
    std::exception_ptr error;  // GUARDED_BY(mu)
  };
  explicit CommHandle(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

// One rank's end of a group of world_size ranks. Every rank must issue the
// same collectives with the same sizes and dtypes in the same order.
//
// Tensors are flat buffers of any shape; collectives see their numel. An
// async op keeps its tensors alive; until its handle is done the caller
// must not write its inputs or read its outputs. Argument errors throw
// EngineError(kInvalidArgument) from the submitting call, naming the op.
// A failed op (dead or hung peer) fails with EngineError(kUnavailable)
// within options().timeout of starting (plus at most 0.3 s in Gloo, spent
// looking for the dead peer's own report), and so does every later op: a
// ring that lost a rank cannot go on.
class Communicator {
 public:
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  const CommOptions& options() const { return options_; }
  // "gloo" or "nccl".
  virtual const char* backend_name() const = 0;
  // Where this communicator's tensors must live.
  virtual DeviceType device_type() const = 0;

  // t = reduction of every rank's t (fp32, fp16 or bf16), identical bits
  // on every rank.
  CommHandle all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::kSum,
                              ReadyEvent ready = nullptr);
  // out = chunk `rank` of the reduction of every rank's in, where in holds
  // world_size chunks of out's numel (same dtype). out may be in's own
  // chunk (in place) or lie outside in.
  CommHandle reduce_scatter_async(const Tensor& in, const Tensor& out,
                                  ReduceOp op = ReduceOp::kSum, ReadyEvent ready = nullptr);
  // Chunk r of out = rank r's in, where out holds world_size chunks of in's
  // numel (same dtype, any dtype). in may be out's chunk `rank` (in place)
  // or lie outside out.
  CommHandle all_gather_async(const Tensor& in, const Tensor& out, ReadyEvent ready = nullptr);
  // t = root's t on every rank (any dtype).
  CommHandle broadcast_async(const Tensor& t, int root);
  // Done once every rank has submitted its barrier.
  CommHandle barrier_async();

  // The blocking forms: the async op, then wait().
  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::kSum);
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::kSum);
  void all_gather(const Tensor& in, const Tensor& out);
  void broadcast(const Tensor& t, int root);
  void barrier();

  // Counters of the ops finished so far (successful ones), per op kind.
  CommStats stats() const;

 protected:
  // Starts the communicator's thread. Throws EngineError(kInvalidArgument)
  // unless 0 <= rank < world_size.
  Communicator(int rank, int world_size, CommOptions options);

  // Waits for the op in flight, fails the queued ones and joins the
  // thread. Every subclass destructor must call it first, so that no op
  // runs on a half-destroyed subclass.
  void stop();

  // The ops, run on the communicator's thread one at a time in submission
  // order, after their arguments were checked. Each must finish by
  // `deadline` or throw EngineError(kUnavailable) naming the op and the
  // peer, and returns the number of elements this rank sent (bytes for
  // the barrier).
  virtual int64_t run_all_reduce(const Tensor& t, ReduceOp op, SteadyTime deadline) = 0;
  virtual int64_t run_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op,
                                     SteadyTime deadline) = 0;
  virtual int64_t run_all_gather(const Tensor& in, const Tensor& out, SteadyTime deadline) = 0;
  virtual int64_t run_broadcast(const Tensor& t, int root, SteadyTime deadline) = 0;
  virtual int64_t run_barrier(SteadyTime deadline) = 0;
  // Orders the next op after `ready` (ReadyEvent), on the communicator's
  // thread before the op's deadline starts. The default blocks until it
  // happened.
  virtual void wait_ready(const Event& ready);

 private:
  struct PendingOp {
    CommOp op;
    size_t element_bytes;  // bytes per counted element
    std::function<int64_t(SteadyTime)> run;
    ReadyEvent ready;
    std::shared_ptr<CommHandle::State> state;
  };

  // Finishes a handle (error null on success), waking its waiters.
  static void complete(CommHandle::State& state, std::exception_ptr error);
  CommHandle submit(CommOp op, size_t element_bytes, std::function<int64_t(SteadyTime)> run,
                    ReadyEvent ready = nullptr);
  void thread_main();
  void check_tensor(CommOp op, const Tensor& t, const char* role) const;

  const int rank_;
  const int world_size_;
  const CommOptions options_;
  mutable std::mutex mu_;
  std::condition_variable queued_;
  std::deque<PendingOp> queue_;  // GUARDED_BY(mu_)
  bool stopping_ = false;        // GUARDED_BY(mu_)
  std::string failure_;          // GUARDED_BY(mu_): why the ring broke, "" while healthy
  CommStats stats_;              // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace mixtrain
