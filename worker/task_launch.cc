// Why: see task_launch.h.
#include "worker/task_launch.h"

#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>

namespace mixtrain::worker {

std::string encode_task_launch(const TaskLaunch& launch) {
  std::string task;
  // Serializing a valid message to JSON cannot fail.
  (void)google::protobuf::util::MessageToJsonString(launch.task, &task);
  nlohmann::json out = {{"task", nlohmann::json::parse(task)},
                        {"backend", launch.backend},
                        {"coordinator", launch.connection.address},
                        {"join_token", launch.connection.join_token},
                        {"worker_id", launch.connection.worker_id},
                        {"worker_secret", launch.connection.worker_secret},
                        {"tls_ca_file", launch.connection.channel.tls_ca_file},
                        {"tls_server_name", launch.connection.channel.tls_server_name},
                        {"data_address", launch.data_address},
                        {"data_iface", launch.data_iface},
                        {"threads", launch.threads}};
  return out.dump();
}

std::optional<TaskLaunch> decode_task_launch(std::string_view text, std::string& error) {
  const nlohmann::json in = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!in.is_object()) {
    error = "the task launch on stdin is not a JSON object";
    return std::nullopt;
  }
  try {
    TaskLaunch out;
    const auto status =
        google::protobuf::util::JsonStringToMessage(in.at("task").dump(), &out.task);
    if (!status.ok()) {
      error = "the task launch holds no valid task: " + std::string(status.message());
      return std::nullopt;
    }
    out.backend = in.at("backend").get<std::string>();
    out.connection.address = in.at("coordinator").get<std::string>();
    out.connection.join_token = in.at("join_token").get<std::string>();
    out.connection.worker_id = in.at("worker_id").get<std::string>();
    out.connection.worker_secret = in.at("worker_secret").get<std::string>();
    out.connection.channel.tls_ca_file = in.at("tls_ca_file").get<std::string>();
    out.connection.channel.tls_server_name = in.at("tls_server_name").get<std::string>();
    out.data_address = in.at("data_address").get<std::string>();
    out.data_iface = in.at("data_iface").get<std::string>();
    out.threads = in.at("threads").get<int>();
    if (out.threads < 1) {
      error = "the task launch asks for " + std::to_string(out.threads) + " threads";
      return std::nullopt;
    }
    return out;
  } catch (const nlohmann::json::exception& e) {
    error = std::string("the task launch is malformed: ") + e.what();
    return std::nullopt;
  }
}

}  // namespace mixtrain::worker
