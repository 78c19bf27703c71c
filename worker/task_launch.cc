// Why: see task_launch.h.
#include "worker/task_launch.h"

#include "proto/task_process.pb.h"

namespace mixtrain::worker {

std::string encode_task_launch(const TaskLaunch& launch) {
  task::TaskLaunch out;
  *out.mutable_task() = launch.task;
  out.set_backend(launch.backend);
  out.set_coordinator(launch.connection.address);
  out.set_join_token(launch.connection.join_token);
  out.set_worker_id(launch.connection.worker_id);
  out.set_worker_secret(launch.connection.worker_secret);
  out.set_tls_ca_file(launch.connection.channel.tls_ca_file);
  out.set_tls_server_name(launch.connection.channel.tls_server_name);
  out.set_data_address(launch.data_address);
  out.set_data_iface(launch.data_iface);
  out.set_threads(launch.threads);
  out.set_memory_limit(launch.memory_limit);
  return out.SerializeAsString();
}

std::optional<TaskLaunch> decode_task_launch(std::string_view text, std::string& error) {
  task::TaskLaunch in;
  if (!in.ParseFromArray(text.data(), static_cast<int>(text.size())) || !in.has_task()) {
    error = "the task launch on stdin is not a TaskLaunch message";
    return std::nullopt;
  }
  if (in.threads() < 1) {
    error = "the task launch asks for " + std::to_string(in.threads()) + " threads";
    return std::nullopt;
  }
  TaskLaunch out;
  out.task = in.task();
  out.backend = in.backend();
  out.connection.address = in.coordinator();
  out.connection.join_token = in.join_token();
  out.connection.worker_id = in.worker_id();
  out.connection.worker_secret = in.worker_secret();
  out.connection.channel.tls_ca_file = in.tls_ca_file();
  out.connection.channel.tls_server_name = in.tls_server_name();
  out.data_address = in.data_address();
  out.data_iface = in.data_iface();
  out.threads = in.threads();
  out.memory_limit = in.memory_limit();
  return out;
}

}  // namespace mixtrain::worker
