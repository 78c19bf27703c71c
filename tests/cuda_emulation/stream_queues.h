// Why: on a GPU, work enqueued on a stream runs later, in stream order,
// while the host goes on; a missing wait (an event, a stream
// synchronisation) lets the host or another stream see memory before the
// work that writes it ran. To make such a bug show, the emulation delays
// every stream's work as long as CUDA allows: it waits in the stream's
// queue and runs only when something waits for it (a synchronisation, an
// event wait on another stream that gets drained, a blocking free).
// Stale data then fails a comparison, and a block freed in stream order
// and used by another stream's later work is an AddressSanitizer report.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>

namespace emu {

struct StreamQueue {
  std::deque<std::function<void()>> work;
  uint64_t enqueued = 0;  // items ever queued
  uint64_t executed = 0;  // items run
};

// A point in a queue: passed once every item queued before it has run.
struct QueueMark {
  StreamQueue* queue = nullptr;  // null: already passed
  uint64_t target = 0;
};

// Registers a new queue (drain_all runs queues in registration order) and
// unregisters one, running its work first.
void add_queue(StreamQueue* queue);
void remove_queue(StreamQueue* queue);

// Queues `work` behind the queue's earlier work; a null queue (the legacy
// default stream) runs everything queued anywhere, then `work`, now.
void enqueue(StreamQueue* queue, std::function<void()> work);
// The point after everything queued so far.
QueueMark mark(StreamQueue* queue);
bool passed(const QueueMark& mark);
// Runs the mark's queue up to the mark (its items may drain others).
void drain(const QueueMark& mark);
// Runs every queue to its end.
void drain_all();

}  // namespace emu
