// Why: see gloo_communicator.h. Store keys, under "<store_prefix>/":
//   gloo/<rank>     Gloo's own rendezvous records (its pair addresses)
//   peer/<rank>     "<host> pid <pid>", to name a peer in errors
//   failure/<rank>  why that rank's ring broke, for the ranks that only see
//                   the connection it then closed
#include "engine/comm/gloo/gloo_communicator.h"

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "engine/comm/gloo/ring_collectives.h"
#include "engine/comm/gloo/ring_link.h"
#include "engine/comm/ring.h"
#include "engine/common/error.h"

namespace mixtrain {
namespace {

// How long a failing rank looks for its peer's failure report: a peer that
// failed first published it before closing the connection, so it is there
// at once unless the peer died without a word.
constexpr auto kReportWait = std::chrono::milliseconds(300);

// Gloo's rendezvous store, backed by ours under a key prefix.
class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(mixtrain::Store& store, std::string prefix, std::chrono::milliseconds timeout)
      : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(prefix_ + key, std::string_view(data.data(), data.size()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string value = store_.get(prefix_ + key, timeout_);
    return {value.begin(), value.end()};
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> prefixed;
    for (const std::string& key : keys) prefixed.push_back(prefix_ + key);
    store_.wait(prefixed, std::min(timeout, timeout_));
  }

 private:
  mixtrain::Store& store_;
  const std::string prefix_;
  const std::chrono::milliseconds timeout_;
};

void ignore_sigpipe_unless_handled() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace

GlooCommunicator::GlooCommunicator(Store& store, int rank, int world_size, CommOptions options)
    : Communicator(rank, world_size, std::move(options)), store_(store) {
  if (world_size == 1) return;
  ignore_sigpipe_unless_handled();
  const std::string host =
      this->options().iface.empty() ? this->options().hostname : this->options().iface;
  const std::string where = "gloo rendezvous (rank " + std::to_string(rank) + " of " +
                            std::to_string(world_size) + " at " + host + ")";
  try {
    gloo::transport::tcp::attr attr;
    if (this->options().iface.empty()) {
      attr.hostname = this->options().hostname;
    } else {
      attr.iface = this->options().iface;
    }
    try {
      device_ = gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {  // Gloo's EnforceNotMet is no gloo::Exception
      throw EngineError(ErrorCode::kUnavailable, "cannot bind " + host + ": " + e.what());
    }
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, world_size);
    context->setTimeout(this->options().timeout);
    store_.set(key("peer/" + std::to_string(rank)), host + " pid " + std::to_string(getpid()));
    GlooStoreAdapter adapter(store_, key("gloo/"), this->options().timeout);
    try {
      context->connectFullMesh(adapter, device_);
    } catch (const gloo::Exception& e) {  // a peer refused, reset or timed out
      throw EngineError(ErrorCode::kUnavailable, std::string(e.what()) + describe_peers());
    } catch (const EngineError& e) {  // a peer never published its address
      throw EngineError(e.code(), std::string(e.what()) + describe_peers());
    }
    context_ = std::move(context);
    for (int r = 0; r < world_size; ++r) {
      const std::string peer =
          store_.get(key("peer/" + std::to_string(r)), this->options().timeout);
      peers_.push_back("rank " + std::to_string(r) + " (" + peer + ")");
    }
  } catch (const gloo::Exception& e) {
    throw EngineError(ErrorCode::kUnavailable, where + ": " + e.what());
  } catch (const EngineError& e) {
    throw EngineError(e.code(), where + ": " + e.what());
  }
}

GlooCommunicator::~GlooCommunicator() {
  stop();
  context_.reset();
  if (options().memory) {
    options().memory->on_free(MemoryPool::kDevice, MemoryCategory::kCommBuffers, scratch_.size());
  }
}

std::string GlooCommunicator::describe_peers() {
  std::string out;
  for (int r = 0; r < world_size(); ++r) {
    if (r == rank()) continue;
    std::string peer = "not published";
    try {
      peer = "at " + store_.get(key("peer/" + std::to_string(r)), std::chrono::milliseconds(0));
    } catch (const EngineError&) {
      // Never published, or the store is gone: say so.
    }
    out += (out.empty() ? " (peers: rank " : ", rank ") + std::to_string(r) + " " + peer;
  }
  return out.empty() ? out : out + ")";
}

std::string GlooCommunicator::key(const std::string& name) const {
  return options().store_prefix + "/" + name;
}

std::byte* GlooCommunicator::scratch(size_t bytes) {
  if (bytes > scratch_.size()) {
    if (options().memory) {
      options().memory->on_free(MemoryPool::kDevice, MemoryCategory::kCommBuffers, scratch_.size());
      options().memory->on_alloc(MemoryPool::kDevice, MemoryCategory::kCommBuffers, bytes);
    }
    scratch_ = std::vector<std::byte>(bytes);
  }
  return scratch_.data();
}

template <class F>
int64_t GlooCommunicator::run_ring(CommOp op, SteadyTime deadline, size_t element_bytes, F&& body) {
  if (world_size() == 1) return 0;
  try {
    RingLink link(*context_, next_slot_++, deadline);
    body(link);
    return link.bytes_sent() / static_cast<int64_t>(element_bytes);
  } catch (const PeerFailure& failure) {
    fail(op, failure);
  }
}

void GlooCommunicator::fail(CommOp op, const PeerFailure& failure) {
  const std::string& peer = peers_[failure.peer()];
  std::string cause =
      failure.timed_out()
          ? peer + " did not respond within " + format_seconds(options().timeout) + " s"
          : peer + " closed the connection (" + failure.what() + ")";
  std::string relayed;
  // A peer that closed the connection may have failed first and said why.
  // A timeout is first-hand, and Gloo has already closed all our
  // connections: publish at once, so those who see them close find it.
  if (!failure.timed_out()) {
    try {
      cause = store_.get(key("failure/" + std::to_string(failure.peer())), kReportWait);
      relayed = " (reported by rank " + std::to_string(failure.peer()) + ")";
    } catch (const EngineError&) {
      // No report: the peer died before it could say why; ours stands.
    }
  }
  try {
    store_.set(key("failure/" + std::to_string(rank())), cause);
  } catch (const EngineError&) {
    // The store is gone too; the error below still names the peer.
  }
  context_.reset();  // closes every connection: our neighbours fail now, not at their deadline
  throw EngineError(ErrorCode::kUnavailable,
                    std::string(comm_op_name(op)) + ": " + cause + relayed);
}

int64_t GlooCommunicator::run_all_reduce(const Tensor& t, ReduceOp op, SteadyTime deadline) {
  const int64_t n = t.numel();
  const size_t element = dtype_size(t.dtype());
  auto* data = static_cast<std::byte*>(t.data());
  std::byte* own_chunk = data + ring_chunk(n, world_size(), rank()).offset * element;
  return run_ring(CommOp::kAllReduce, deadline, element, [&](RingLink& link) {
    std::byte* work = scratch(ring_reduce_scatter_scratch_bytes(n, world_size(), t.dtype()));
    ring_reduce_scatter(link, data, own_chunk, n, t.dtype(), op, work);
    ring_all_gather(link, data, n, element);
  });
}

int64_t GlooCommunicator::run_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op,
                                             SteadyTime deadline) {
  if (world_size() == 1 && out.data() != in.data()) std::memcpy(out.data(), in.data(), in.nbytes());
  const int64_t n = in.numel();
  return run_ring(CommOp::kReduceScatter, deadline, dtype_size(in.dtype()), [&](RingLink& link) {
    std::byte* work = scratch(ring_reduce_scatter_scratch_bytes(n, world_size(), in.dtype()));
    ring_reduce_scatter(link, static_cast<const std::byte*>(in.data()),
                        static_cast<std::byte*>(out.data()), n, in.dtype(), op, work);
  });
}

int64_t GlooCommunicator::run_all_gather(const Tensor& in, const Tensor& out, SteadyTime deadline) {
  const size_t element = dtype_size(in.dtype());
  auto* data = static_cast<std::byte*>(out.data());
  std::byte* own_chunk = data + rank() * in.nbytes();
  if (own_chunk != in.data()) std::memcpy(own_chunk, in.data(), in.nbytes());
  return run_ring(CommOp::kAllGather, deadline, element,
                  [&](RingLink& link) { ring_all_gather(link, data, out.numel(), element); });
}

int64_t GlooCommunicator::run_broadcast(const Tensor& t, int root, SteadyTime deadline) {
  return run_ring(CommOp::kBroadcast, deadline, dtype_size(t.dtype()), [&](RingLink& link) {
    ring_broadcast(link, static_cast<std::byte*>(t.data()), t.nbytes(), root);
  });
}

int64_t GlooCommunicator::run_barrier(SteadyTime deadline) {
  // An all-gather of one byte per rank: nobody gets every byte before
  // every rank has sent its own.
  std::vector<std::byte> bytes(world_size());
  return run_ring(CommOp::kBarrier, deadline, 1,
                  [&](RingLink& link) { ring_all_gather(link, bytes.data(), world_size(), 1); });
}

}  // namespace mixtrain
