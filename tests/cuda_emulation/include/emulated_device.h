// Why: the execution model of the host emulation. Every CUDA thread is a
// fiber with a stack of its own, and a block's fibers take turns on one OS
// thread, switching only where CUDA threads may wait for each other
// (__syncthreads, warp shuffles): switching fibers costs far less than
// switching hundreds of OS threads per barrier. The sanitizers see each
// fiber as a thread of its own, ordered with the others only by the
// barriers and by the start and end of its block (sanitizer_hooks.h), so
// ThreadSanitizer reports races between CUDA threads as it would between
// threads. kConcurrentBlocks "multiprocessors", each an OS thread, run
// blocks of one launch at the same time, so races between blocks are seen
// too. Launches run one at a time, in call order. A block whose threads
// all wait at barriers that the others never reach stops the program
// (that is a hang on a GPU).
#pragma once

#include <cuda_runtime.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "sanitizer_hooks.h"

// The built-in variables of the running CUDA thread.
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;

namespace emu {

inline constexpr unsigned kWarpSize = 32;
inline constexpr unsigned kMaxBlockThreads = 1024;
// Blocks of one launch that run at the same time (each __shared__
// variable has one instance per multiprocessor).
inline constexpr int kConcurrentBlocks = 2;
// A CUDA thread's stack, below a guard page. Kernels keep little on it.
inline constexpr size_t kFiberStackBytes = 64 * 1024;

// Stops the process with a message: what a kernel does is outside what the
// emulation (or CUDA) defines. Kernels cannot throw.
[[noreturn]] inline void device_fault(const char* what) {
  std::fprintf(stderr, "cuda emulation: %s\n", what);
  std::abort();
}

// For launches (cuda_runtime_stub.cc): whether `stream` is a live stream,
// and recording a failed launch for the next cudaGetLastError (a bad
// stream records its own error).
bool usable_stream(cudaStream_t stream);
void record_launch_error(cudaError_t error);
// Queues a launch's work on its stream (stream_queues.h): it runs when
// something waits for the stream.
void enqueue_on(cudaStream_t stream, std::function<void()> work);

// ---- host <-> multiprocessor hand-off ---------------------------------------
// Sleeps until `word` no longer holds `value` (acquire) and returns it.
inline uint32_t wait_while_equal(const std::atomic<uint32_t>& word, uint32_t value) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  uint32_t now;
  while ((now = word.load(std::memory_order_acquire)) == value) {
    syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, value, nullptr, nullptr, 0);
  }
  return now;
}
// Stores `value` (release) and wakes the threads waiting for a change.
inline void publish(std::atomic<uint32_t>& word, uint32_t value) {
  word.store(value, std::memory_order_release);
  syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

// ---- fibers ------------------------------------------------------------------
// A place to switch to: a fiber, or the multiprocessor's own OS thread.
struct Context {
  ucontext_t registers;
  const void* stack_bottom = nullptr;
  size_t stack_bytes = 0;
  void* tsan_fiber = nullptr;
  void* fake_stack = nullptr;  // AddressSanitizer's, while switched out
};

EMU_BOOKKEEPING inline void transfer(Context& from, Context& to) {
  sanitizer::before_switch(&from.fake_stack, to.tsan_fiber, to.stack_bottom, to.stack_bytes);
  swapcontext(&from.registers, &to.registers);
  sanitizer::after_switch(from.fake_stack);
}

class Barrier;

// One CUDA thread. Its fiber runs the current block's kernel each time it
// is resumed for a new block.
struct Fiber {
  enum class State { kRunnable, kWaiting, kDone };
  Context context;
  unsigned index = 0;
  State state = State::kDone;
  const Barrier* waiting_at = nullptr;
  unsigned shuffles_done = 0;  // in this block (warp exchange buffers alternate)
};

class Multiprocessor;
inline thread_local Multiprocessor* current_multiprocessor = nullptr;

// A barrier of the fibers [first, first + size) of a block. Arrivals
// release and departures acquire sync_[phase % 2], so every arrival
// happens before every departure; two sync objects keep a fast fiber's
// next arrival out of a slow one's departure. A fiber that exits leaves
// the barrier (arrive_and_drop), as an exited CUDA thread no longer takes
// part in __syncthreads.
class Barrier {
 public:
  EMU_BOOKKEEPING void reset(unsigned first, unsigned size) {
    first_ = first;
    size_ = size;
    parties_ = size;
    arrived_ = 0;
  }
  EMU_BOOKKEEPING unsigned first() const { return first_; }
  EMU_BOOKKEEPING unsigned size() const { return size_; }

  // Waits for the other parties; returns how many completed the phase
  // (fewer than size() when some have exited).
  EMU_BOOKKEEPING unsigned arrive_and_wait();
  EMU_BOOKKEEPING void arrive_and_drop();

 private:
  EMU_BOOKKEEPING void complete();

  unsigned first_ = 0, size_ = 0, parties_ = 0, arrived_ = 0, completed_parties_ = 0;
  unsigned phase_ = 0;
  char sync_[2] = {};
};

// One warp of the running block: its barrier and the lanes' shuffle
// values, double-buffered so that one barrier per shuffle suffices (a lane
// writes buffer k % 2 for its k-th shuffle only after every lane has
// passed the barrier of shuffle k - 1, so has read shuffle k - 2).
struct Warp {
  Barrier barrier;
  uint64_t exchange[2][kWarpSize] = {};
};

// The launch a multiprocessor works on: blocks first, first + stride, ...
// of the grid, in x, y, z order.
struct Launch {
  const std::function<void()>* body = nullptr;
  dim3 grid, block;
  unsigned first = 0, stride = 1;
};

// An OS thread that runs blocks one at a time, each block's CUDA threads
// as fibers taking turns in a run queue.
class Multiprocessor {
 public:
  explicit Multiprocessor(int index) : index_(index), thread_([this] { serve(); }) {}
  ~Multiprocessor() {
    stop_ = true;
    publish(started_, launches_ + 1);
    thread_.join();
    for (unsigned i = 0; i < fiber_count_; ++i) {
      munmap(static_cast<char*>(const_cast<void*>(fibers_[i]->context.stack_bottom)) - kGuardBytes,
             kFiberStackBytes + kGuardBytes);
      delete fibers_[i];
    }
  }
  Multiprocessor(const Multiprocessor&) = delete;
  Multiprocessor& operator=(const Multiprocessor&) = delete;

  // Host side: start a launch's share of blocks; wait for them.
  void start(const Launch& launch) {
    launch_ = launch;
    publish(started_, ++launches_);
  }
  void wait() {
    uint32_t finished = finished_.load(std::memory_order_acquire);
    while (finished != launches_) finished = wait_while_equal(finished_, finished);
  }

  // Fiber side.
  EMU_BOOKKEEPING static Multiprocessor& current() { return *current_multiprocessor; }
  EMU_BOOKKEEPING int index() const { return index_; }
  EMU_BOOKKEEPING Fiber& running() { return *fibers_[running_]; }
  EMU_BOOKKEEPING Barrier& block_barrier() { return block_barrier_; }
  EMU_BOOKKEEPING Warp& warp(unsigned index) { return warps_[index]; }

  // The running fiber waits at `barrier` until wake_waiting releases it.
  EMU_BOOKKEEPING void wait_at(const Barrier& barrier) {
    Fiber& self = running();
    self.state = Fiber::State::kWaiting;
    self.waiting_at = &barrier;
    switch_away(self.context);
  }
  EMU_BOOKKEEPING void wake_waiting(const Barrier& barrier) {
    for (unsigned i = barrier.first(); i < barrier.first() + barrier.size(); ++i) {
      Fiber& f = *fibers_[i];
      if (f.state == Fiber::State::kWaiting && f.waiting_at == &barrier) make_runnable(f);
    }
  }

 private:
  static constexpr size_t kGuardBytes = 4096;

  void serve() {
    current_multiprocessor = this;
    scheduler_.tsan_fiber = sanitizer::current_fiber();
    pthread_attr_t attr;
    pthread_getattr_np(pthread_self(), &attr);
    void* bottom;
    pthread_attr_getstack(&attr, &bottom, &scheduler_.stack_bytes);
    pthread_attr_destroy(&attr);
    scheduler_.stack_bottom = bottom;
    for (uint32_t seen = 0;;) {
      seen = wait_while_equal(started_, seen);
      if (stop_) return;
      const Launch l = launch_;
      const uint64_t columns = l.grid.x, plane = columns * l.grid.y;
      for (uint64_t b = l.first; b < plane * l.grid.z; b += l.stride) {
        run_block(l, {static_cast<unsigned>(b % columns), static_cast<unsigned>(b / columns % l.grid.y),
                      static_cast<unsigned>(b / plane)});
      }
      publish(finished_, seen);
    }
  }

  EMU_BOOKKEEPING void run_block(const Launch& l, uint3 block_index) {
    const unsigned threads = l.block.x;
    while (fiber_count_ < threads) add_fiber();
    block_barrier_.reset(0, threads);
    for (unsigned first = 0; first < threads; first += kWarpSize) {
      warps_[first / kWarpSize].barrier.reset(first, std::min(kWarpSize, threads - first));
    }
    body_ = l.body;
    blockIdx = block_index;
    blockDim = l.block;
    gridDim = l.grid;
    for (unsigned i = 0; i < threads; ++i) {
      fibers_[i]->shuffles_done = 0;
      make_runnable(*fibers_[i]);
    }
    unfinished_ = threads;
    sanitizer::release(&block_started_);
    switch_away(scheduler_);
    if (unfinished_ != 0) {
      device_fault("deadlock: every unfinished thread of a block waits at a __syncthreads or "
                   "warp shuffle that the others do not reach");
    }
    sanitizer::acquire(&block_finished_);
  }

  EMU_BOOKKEEPING void add_fiber() {
    Fiber* f = new Fiber;
    f->index = fiber_count_;
    void* memory = mmap(nullptr, kFiberStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) device_fault("cannot map a fiber stack");
    mprotect(memory, kGuardBytes, PROT_NONE);
    char* stack = static_cast<char*>(memory) + kGuardBytes;
    getcontext(&f->context.registers);
    f->context.registers.uc_stack.ss_sp = stack;
    f->context.registers.uc_stack.ss_size = kFiberStackBytes;
    f->context.registers.uc_link = nullptr;
    makecontext(&f->context.registers, fiber_main, 0);
    f->context.stack_bottom = stack;
    f->context.stack_bytes = kFiberStackBytes;
    f->context.tsan_fiber = sanitizer::create_fiber();
    fibers_[fiber_count_++] = f;
  }

  EMU_BOOKKEEPING void make_runnable(Fiber& f) {
    f.state = Fiber::State::kRunnable;
    f.waiting_at = nullptr;
    run_queue_[queue_tail_++ % kMaxBlockThreads] = f.index;
  }

  // Leaves `from` for the next runnable fiber, or for the scheduler when
  // none is left (the block is done, or deadlocked); returns when `from`
  // is switched to again.
  EMU_BOOKKEEPING void switch_away(Context& from) {
    if (queue_head_ == queue_tail_) {
      transfer(from, scheduler_);
      return;
    }
    running_ = run_queue_[queue_head_++ % kMaxBlockThreads];
    threadIdx = {running_, 0, 0};
    transfer(from, fibers_[running_]->context);
  }

  // A fiber's whole life: run the block's kernel, leave the barriers,
  // switch away, and again for the next block.
  EMU_BOOKKEEPING static void fiber_main() {
    sanitizer::after_switch(nullptr);
    Multiprocessor& mp = current();
    for (;;) {
      Fiber& self = mp.running();
      sanitizer::acquire(&mp.block_started_);
      (*mp.body_)();
      mp.warps_[self.index / kWarpSize].barrier.arrive_and_drop();
      mp.block_barrier_.arrive_and_drop();
      sanitizer::release(&mp.block_finished_);
      self.state = Fiber::State::kDone;
      --mp.unfinished_;
      mp.switch_away(self.context);
    }
  }

  const int index_;
  // Written by the host before it publishes started_.
  Launch launch_;
  bool stop_ = false;
  uint32_t launches_ = 0;  // host only
  std::atomic<uint32_t> started_{0};
  std::atomic<uint32_t> finished_{0};
  // The multiprocessor thread's own books.
  Context scheduler_;
  // Plain arrays: library containers would be instrumented (see
  // EMU_BOOKKEEPING), and they are read by every fiber.
  Fiber* fibers_[kMaxBlockThreads] = {};
  unsigned fiber_count_ = 0;
  const std::function<void()>* body_ = nullptr;
  Barrier block_barrier_;
  Warp warps_[kMaxBlockThreads / kWarpSize];
  unsigned run_queue_[kMaxBlockThreads] = {};
  unsigned queue_head_ = 0, queue_tail_ = 0;
  unsigned running_ = 0;
  unsigned unfinished_ = 0;
  char block_started_ = 0, block_finished_ = 0;  // sync objects
  std::thread thread_;  // last: starts once the rest is built
};

inline unsigned Barrier::arrive_and_wait() {
  const unsigned phase = phase_;
  sanitizer::release(&sync_[phase % 2]);
  if (++arrived_ == parties_) {
    complete();
  } else {
    Multiprocessor::current().wait_at(*this);
  }
  sanitizer::acquire(&sync_[phase % 2]);
  return completed_parties_;
}

inline void Barrier::arrive_and_drop() {
  sanitizer::release(&sync_[phase_ % 2]);
  --parties_;
  if (arrived_ != 0 && arrived_ == parties_) complete();
}

inline void Barrier::complete() {
  completed_parties_ = parties_;
  arrived_ = 0;
  ++phase_;
  Multiprocessor::current().wake_waiting(*this);
}

// The multiprocessor running the current block: which instance of each
// __shared__ variable is the block's.
inline int multiprocessor_index() { return Multiprocessor::current().index(); }

// The emulated device: kConcurrentBlocks multiprocessors, one launch at a time.
class Device {
 public:
  static Device& get() {
    static Device device;
    return device;
  }

  // Runs body once per thread of the grid; returns when every block has
  // finished.
  void run(dim3 grid, dim3 block, const std::function<void()>& body) {
    std::lock_guard<std::mutex> lock(launch_mu_);
    const uint64_t total = uint64_t{grid.x} * grid.y * grid.z;
    const unsigned used = static_cast<unsigned>(std::min<uint64_t>(total, kConcurrentBlocks));
    for (unsigned i = 0; i < used; ++i) {
      multiprocessors_[i]->start({&body, grid, block, i, kConcurrentBlocks});
    }
    for (unsigned i = 0; i < used; ++i) multiprocessors_[i]->wait();
  }

 private:
  Device() {
    for (int i = 0; i < kConcurrentBlocks; ++i) {
      multiprocessors_.push_back(std::make_unique<Multiprocessor>(i));
    }
  }

  std::mutex launch_mu_;
  std::vector<std::unique_ptr<Multiprocessor>> multiprocessors_;
};

// kernel<<<grid, block, dynamic_smem, stream>>>(args...) as rewritten by
// rewrite_launches.py: the arguments are evaluated once, here, and every
// CUDA thread calls kernel with its own copy when the stream runs the
// launch. An invalid configuration or stream fails like CUDA's
// (cudaGetLastError) at the call, without queueing anything.
template <class Kernel, class... Args>
void launch(dim3 grid, dim3 block, size_t dynamic_smem, cudaStream_t stream, Kernel kernel,
            Args... args) {
  if (block.y != 1 || block.z != 1) device_fault("only 1-D thread blocks are emulated");
  if (dynamic_smem != 0) device_fault("dynamic shared memory is not emulated");
  if (!usable_stream(stream)) return;
  if (block.x == 0 || block.x > kMaxBlockThreads || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
    record_launch_error(cudaErrorInvalidConfiguration);
    return;
  }
  enqueue_on(stream, [grid, block, kernel, params = std::tuple<Args...>(args...)] {
    Device::get().run(grid, block, [&] { std::apply(kernel, params); });
  });
}

}  // namespace emu
