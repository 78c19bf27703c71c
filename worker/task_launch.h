// Why: the agent hands a task to its task process on the child's stdin
// (never on the command line, where the join token would show in `ps`):
// one JSON object with the task, the agent's backend and how to reach the
// coordinator's rendezvous store.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "mixtrain.pb.h"
#include "worker_connection.h"

namespace mixtrain::worker {

struct TaskLaunch {
  v1::Task task;
  std::string backend;  // "cpu" or "cuda": what the agent trains with
  ConnectionOptions connection;
};

// {"task":{...protobuf JSON of Task...},"backend":..,"coordinator":..,
//  "join_token":..,"tls_ca_file":..,"tls_server_name":..}
std::string encode_task_launch(const TaskLaunch& launch);

// The launch `text` holds; nullopt (and `error` set) when it is malformed.
std::optional<TaskLaunch> decode_task_launch(std::string_view text, std::string& error);

}  // namespace mixtrain::worker
