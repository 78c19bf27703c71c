// Why: the agent hands a task to its task process on the child's stdin
// (never on the command line, where the tokens would show in `ps`): the
// task, the agent's backend, how to reach the coordinator's rendezvous
// store, the address to bind for peers and the threads to use, as one
// task::TaskLaunch message (proto/task_process.proto).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "proto/mixtrain.pb.h"
#include "worker/worker_connection.h"

namespace mixtrain::worker {

struct TaskLaunch {
  v1::Task task;
  std::string backend;  // "cpu" or "cuda": what the agent trains with
  ConnectionOptions connection;
  std::string data_address;  // the rank binds and advertises this (Gloo's hostname)
  std::string data_iface;    // the interface holding it, for NCCL_SOCKET_IFNAME; "" unknown
  int threads = 1;           // CPU threads of the rank (OpenMP)
  int64_t memory_limit = 0;  // bytes the rank may hold in RAM; 0: no limit
};

// The serialized task::TaskLaunch, all of stdin.
std::string encode_task_launch(const TaskLaunch& launch);

// The launch `text` holds; nullopt (and `error` set) when it is malformed.
std::optional<TaskLaunch> decode_task_launch(std::string_view text, std::string& error);

}  // namespace mixtrain::worker
