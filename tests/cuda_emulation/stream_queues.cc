// Why: see stream_queues.h. One recursive lock covers every queue: an item
// that waits for another stream's event drains that queue from inside.
#include "stream_queues.h"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace emu {
namespace {

std::recursive_mutex& queues_mu() {
  static std::recursive_mutex mu;
  return mu;
}
std::vector<StreamQueue*>& queues() {  // guarded by queues_mu
  static std::vector<StreamQueue*> all;
  return all;
}

}  // namespace

void add_queue(StreamQueue* queue) {
  std::lock_guard lock(queues_mu());
  queues().push_back(queue);
}

void remove_queue(StreamQueue* queue) {
  std::lock_guard lock(queues_mu());
  drain(mark(queue));
  std::erase(queues(), queue);
}

void enqueue(StreamQueue* queue, std::function<void()> work) {
  std::lock_guard lock(queues_mu());
  if (queue == nullptr) {
    drain_all();
    work();
    return;
  }
  queue->work.push_back(std::move(work));
  ++queue->enqueued;
}

QueueMark mark(StreamQueue* queue) {
  std::lock_guard lock(queues_mu());
  return queue == nullptr ? QueueMark{} : QueueMark{queue, queue->enqueued};
}

bool passed(const QueueMark& m) {
  std::lock_guard lock(queues_mu());
  return m.queue == nullptr || m.queue->executed >= m.target;
}

void drain(const QueueMark& m) {
  std::lock_guard lock(queues_mu());
  if (m.queue == nullptr) return;
  while (m.queue->executed < m.target) {
    std::function<void()> item = std::move(m.queue->work.front());
    m.queue->work.pop_front();
    ++m.queue->executed;  // before running: an item never waits for itself
    item();
  }
}

void drain_all() {
  std::lock_guard lock(queues_mu());
  for (bool ran = true; ran;) {  // an item may queue more work elsewhere
    ran = false;
    for (StreamQueue* queue : std::vector<StreamQueue*>(queues())) {
      if (queue->executed < queue->enqueued) {
        drain(mark(queue));
        ran = true;
      }
    }
  }
}

}  // namespace emu
