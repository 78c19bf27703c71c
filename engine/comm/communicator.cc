// Why: see communicator.h. Argument checks run on the caller's thread, so
// mistakes surface where they were made; the collectives themselves run on
// one thread per communicator, which gives every rank the same order of
// ops whatever mix of blocking and async calls it makes.
#include "engine/comm/communicator.h"

#include "engine/backend/backend.h"
#include "engine/common/error.h"
#include "engine/numerics/dtype.h"

namespace mixtrain {
namespace {

const char* device_name(DeviceType type) { return type == DeviceType::kCpu ? "cpu" : "cuda"; }

// `part` (world_size chunks of it make `whole`) must be whole's chunk
// `rank` or lie entirely outside whole.
void check_in_place_or_disjoint(CommOp op, const Tensor& whole, const Tensor& part, int rank) {
  const auto* whole_begin = static_cast<const char*>(whole.data());
  const auto* part_begin = static_cast<const char*>(part.data());
  const bool disjoint =
      part_begin + part.nbytes() <= whole_begin || part_begin >= whole_begin + whole.nbytes();
  const bool own_chunk = part_begin == whole_begin + rank * part.nbytes();
  MIXTRAIN_CHECK_ARG(disjoint || own_chunk, std::string(comm_op_name(op)) + ": " + part.describe() +
                                                " overlaps " + whole.describe() +
                                                " other than as chunk " + std::to_string(rank));
}

void check_float(CommOp op, const Tensor& t) {
  MIXTRAIN_CHECK_ARG(is_float_compute(t.dtype()), std::string(comm_op_name(op)) + ": dtype " +
                                                      dtype_name(t.dtype()) +
                                                      " is not one of fp32, fp16, bf16");
}

}  // namespace

void CommHandle::wait() const {
  if (state_ == nullptr) return;
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->finished.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

bool CommHandle::done() const {
  if (state_ == nullptr) return true;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

void Communicator::complete(CommHandle::State& state, std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(state.mu);
    state.done = true;
    state.error = std::move(error);
  }
  state.finished.notify_all();
}

Communicator::Communicator(int rank, int world_size, CommOptions options)
    : rank_(rank), world_size_(world_size), options_(std::move(options)) {
  MIXTRAIN_CHECK_ARG(world_size >= 1 && rank >= 0 && rank < world_size,
                     "communicator: rank " + std::to_string(rank) + " is not in a world of " +
                         std::to_string(world_size));
  MIXTRAIN_CHECK_ARG(options_.timeout.count() > 0, "communicator: timeout must be positive");
  thread_ = std::thread([this] { thread_main(); });
}

Communicator::~Communicator() { stop(); }

void Communicator::stop() {
  std::deque<PendingOp> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  queued_.notify_all();
  for (PendingOp& item : dropped) {
    complete(*item.state,
             std::make_exception_ptr(EngineError(
                 ErrorCode::kUnavailable, std::string(comm_op_name(item.op)) +
                                              ": the communicator was destroyed before it ran")));
  }
  if (thread_.joinable()) thread_.join();
}

void Communicator::thread_main() {
  for (;;) {
    PendingOp item;
    std::string failure;
    {
      std::unique_lock<std::mutex> lock(mu_);
      queued_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      failure = failure_;
    }
    const std::string op_name = comm_op_name(item.op);
    auto start = std::chrono::steady_clock::now();
    int64_t sent = 0;
    std::string error_message;
    std::exception_ptr error;
    if (!failure.empty()) {
      error_message =
          op_name + ": communicator unusable after an earlier failure (" + failure + ")";
      error = std::make_exception_ptr(EngineError(ErrorCode::kUnavailable, error_message));
    } else {
      try {
        if (item.ready) {
          wait_ready(*item.ready);
          start = std::chrono::steady_clock::now();  // the peers' time starts now
        }
        sent = item.run(start + options_.timeout);
      } catch (const EngineError& e) {
        error_message = e.what();
        error = std::current_exception();
      } catch (const std::exception& e) {
        error_message = op_name + ": " + e.what();
        error = std::make_exception_ptr(EngineError(ErrorCode::kInternal, error_message));
      }
    }
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error) {
        if (failure_.empty()) failure_ = error_message;
      } else {
        CommOpStats& s = stats_[item.op];
        s.calls += 1;
        s.elements_sent += sent;
        s.bytes_sent += sent * static_cast<int64_t>(item.element_bytes);
        s.seconds += elapsed.count();
      }
    }
    complete(*item.state, error);
  }
}

void Communicator::wait_ready(const Event& ready) { ready.wait(); }

CommHandle Communicator::submit(CommOp op, size_t element_bytes,
                                std::function<int64_t(SteadyTime)> run, ReadyEvent ready) {
  auto state = std::make_shared<CommHandle::State>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      throw EngineError(ErrorCode::kFailedPrecondition,
                        std::string(comm_op_name(op)) + ": the communicator is shutting down");
    }
    queue_.push_back({op, element_bytes, std::move(run), std::move(ready), state});
  }
  queued_.notify_one();
  return CommHandle(std::move(state));
}

void Communicator::check_tensor(CommOp op, const Tensor& t, const char* role) const {
  MIXTRAIN_CHECK_ARG(t.defined(), std::string(comm_op_name(op)) + ": " + role + " is undefined");
  MIXTRAIN_CHECK_ARG(t.device_type() == device_type(),
                     std::string(comm_op_name(op)) + ": " + role + " " + t.describe() + " is a " +
                         device_name(t.device_type()) + " tensor; the " + backend_name() +
                         " communicator needs " + device_name(device_type()) + " tensors");
}

CommHandle Communicator::all_reduce_async(const Tensor& t, ReduceOp op, ReadyEvent ready) {
  check_tensor(CommOp::kAllReduce, t, "tensor");
  check_float(CommOp::kAllReduce, t);
  return submit(
      CommOp::kAllReduce, dtype_size(t.dtype()),
      [this, t, op](SteadyTime deadline) { return run_all_reduce(t, op, deadline); },
      std::move(ready));
}

CommHandle Communicator::reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op,
                                              ReadyEvent ready) {
  const CommOp kind = CommOp::kReduceScatter;
  check_tensor(kind, in, "input");
  check_tensor(kind, out, "output");
  check_float(kind, in);
  MIXTRAIN_CHECK_ARG(in.dtype() == out.dtype() && in.numel() == out.numel() * world_size_,
                     "reduce_scatter: input " + in.describe() + " must hold world_size (" +
                         std::to_string(world_size_) + ") chunks of output " + out.describe());
  check_in_place_or_disjoint(kind, in, out, rank_);
  return submit(
      kind, dtype_size(in.dtype()),
      [this, in, out, op](SteadyTime deadline) { return run_reduce_scatter(in, out, op, deadline); },
      std::move(ready));
}

CommHandle Communicator::all_gather_async(const Tensor& in, const Tensor& out, ReadyEvent ready) {
  const CommOp kind = CommOp::kAllGather;
  check_tensor(kind, in, "input");
  check_tensor(kind, out, "output");
  MIXTRAIN_CHECK_ARG(in.dtype() == out.dtype() && out.numel() == in.numel() * world_size_,
                     "all_gather: output " + out.describe() + " must hold world_size (" +
                         std::to_string(world_size_) + ") chunks of input " + in.describe());
  check_in_place_or_disjoint(kind, out, in, rank_);
  return submit(
      kind, dtype_size(in.dtype()),
      [this, in, out](SteadyTime deadline) { return run_all_gather(in, out, deadline); },
      std::move(ready));
}

CommHandle Communicator::broadcast_async(const Tensor& t, int root) {
  check_tensor(CommOp::kBroadcast, t, "tensor");
  MIXTRAIN_CHECK_ARG(root >= 0 && root < world_size_, "broadcast: root " + std::to_string(root) +
                                                          " is not in a world of " +
                                                          std::to_string(world_size_));
  return submit(CommOp::kBroadcast, dtype_size(t.dtype()),
                [this, t, root](SteadyTime deadline) { return run_broadcast(t, root, deadline); });
}

CommHandle Communicator::barrier_async() {
  return submit(CommOp::kBarrier, 1, [this](SteadyTime deadline) { return run_barrier(deadline); });
}

void Communicator::all_reduce(const Tensor& t, ReduceOp op) { all_reduce_async(t, op).wait(); }

void Communicator::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
  reduce_scatter_async(in, out, op).wait();
}

void Communicator::all_gather(const Tensor& in, const Tensor& out) {
  all_gather_async(in, out).wait();
}

void Communicator::broadcast(const Tensor& t, int root) { broadcast_async(t, root).wait(); }

void Communicator::barrier() { barrier_async().wait(); }

CommStats Communicator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace mixtrain
