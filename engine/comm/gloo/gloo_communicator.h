// Why: collectives on CPU tensors between processes, over Gloo's TCP
// transport (Debian's libgloo-dev). Gloo brings the rendezvous (through our
// Store) and the full mesh of TCP pairs; the ring algorithms are ours
// (ring_collectives.h), for exact ring element counts, NCCL's ring order
// and per-hop 16-bit rounding, per-op deadlines, and failures that name
// the peer. Gloo's own gloo::allreduce (with a reduce function rounding
// as ours) and gloo::allgather were measured against them with
// bench/comm_bench (2026-12-03, 2 and 4 ranks on loopback, median of three
// alternating runs, 1 KiB to 64 MiB): Gloo's all-reduce took 1.07-7.7x
// our time at every size, its all-gather 0.87-2.3x (faster only at 16 and
// 64 MiB, by less than the runs vary); and Gloo's algorithms cannot say
// which peer failed. So the rings stay ours. When a collective fails, the
// rank publishes its diagnosis in the store and closes its connections,
// so the rest of the ring fails fast too and names the rank that died
// first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/comm/store.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}  // namespace transport
}  // namespace gloo

namespace mixtrain {

class PeerFailure;

class GlooCommunicator final : public Communicator {
 public:
  // Joins the world_size ranks that use `store` with the same
  // options.store_prefix: binds options.hostname (or options.iface),
  // publishes this rank's address and connects to every peer, all within
  // options.timeout. world_size 1 connects to nothing. `store` must
  // outlive the communicator. Throws EngineError(kUnavailable) naming the
  // missing rank's key or the failed connection. Ignores SIGPIPE in this
  // process unless a handler is installed (Gloo writes to sockets a dead
  // peer may have closed).
  GlooCommunicator(Store& store, int rank, int world_size, CommOptions options = {});
  ~GlooCommunicator() override;

  const char* backend_name() const override { return "gloo"; }
  DeviceType device_type() const override { return DeviceType::kCpu; }

 protected:
  int64_t run_all_reduce(const Tensor& t, ReduceOp op, SteadyTime deadline) override;
  int64_t run_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op,
                             SteadyTime deadline) override;
  int64_t run_all_gather(const Tensor& in, const Tensor& out, SteadyTime deadline) override;
  int64_t run_broadcast(const Tensor& t, int root, SteadyTime deadline) override;
  int64_t run_barrier(SteadyTime deadline) override;

 private:
  // Runs one ring collective over a fresh RingLink and returns the
  // elements (of element_bytes each) it sent; turns a PeerFailure into the
  // communicator's failure.
  template <class F>
  int64_t run_ring(CommOp op, SteadyTime deadline, size_t element_bytes, F&& body);
  // Diagnoses `failure` (relaying the peer's own report when it failed
  // first), publishes it, closes every connection, and throws
  // EngineError(kUnavailable) "<op>: <cause>".
  [[noreturn]] void fail(CommOp op, const PeerFailure& failure);
  // " (peers: rank 1 at <host> pid <pid>, rank 2 not published)": where
  // the other ranks said they are, for a failed rendezvous.
  std::string describe_peers();
  // "<store_prefix>/<name>".
  std::string key(const std::string& name) const;
  // At least `bytes` of staging memory, counted in options().memory.
  std::byte* scratch(size_t bytes);

  Store& store_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;  // null once failed
  std::vector<std::string> peers_;          // "rank 2 (127.0.0.1 pid 4242)"
  uint64_t next_slot_ = 0;
  std::vector<std::byte> scratch_;
};

}  // namespace mixtrain
