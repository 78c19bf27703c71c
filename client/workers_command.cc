// Why: see workers_command.h.
#include "client/workers_command.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "client/job_view.h"
#include "client/text_table.h"
#include "proto/training_device.h"

namespace mixtrain::cli {
namespace {

// "IDLE", "BUSY", "LOST", "JOINING" ("UNSPECIFIED" for a state this CLI does not know).
std::string state_name(v1::WorkerState state) {
  const std::string& name = v1::WorkerState_Name(state);  // "WORKER_STATE_IDLE"
  return name.empty() ? "UNSPECIFIED" : name.substr(std::string_view("WORKER_STATE_").size());
}

// "cpu", "cuda", or "-" when the worker did not say.
std::string backend_name(v1::Backend backend) {
  if (backend == v1::BACKEND_CPU) return "cpu";
  return backend == v1::BACKEND_CUDA ? "cuda" : "-";
}

std::string gibibytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

// What the BACKEND column says: "cuda:1 (NVIDIA H200, 139.8 GiB)" for the
// GPU the worker's rank trains on, "cpu (no GPU: <why>)" when its build has
// CUDA but no device is usable, else "cpu".
std::string device_text(const v1::Resources& resources) {
  const std::string name = v1::training_device_name(resources);
  if (const v1::CudaDevice* device = v1::training_device(resources)) {
    return name + " (" + device->name() + ", " + gibibytes(device->memory_bytes()) + ")";
  }
  if (resources.backend() == v1::BACKEND_CPU && !resources.cuda_unavailable().empty()) {
    return name + " (no GPU: " + resources.cuda_unavailable() + ")";
  }
  return name;
}

// "job/attempt/rank" of the task a busy worker runs; "-" when idle.
std::string task_name(const v1::Worker& worker) {
  if (!worker.has_task()) return "-";
  return worker.task().job_id() + "/a" + std::to_string(worker.task().attempt()) + "/r" +
         std::to_string(worker.task().rank());
}


nlohmann::ordered_json worker_json(const v1::Worker& worker) {
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (const v1::CudaDevice& device : worker.resources().cuda_devices()) {
    devices.push_back({{"index", device.index()},
                       {"name", device.name()},
                       {"memory_bytes", device.memory_bytes()}});
  }
  return {{"id", worker.id()},
          {"hostname", worker.hostname()},
          {"state", state_name(worker.state())},
          {"backend", backend_name(worker.resources().backend())},
          {"device", v1::training_device_name(worker.resources())},
          {"cuda_unavailable", worker.resources().cuda_unavailable()},
          {"cpu_cores", worker.resources().cpu_cores()},
          {"threads", worker.resources().threads()},
          {"memory_bytes", worker.resources().memory_bytes()},
          {"cuda_devices", std::move(devices)},
          {"data_address", worker.data_address()},
          {"metrics_address", worker.metrics_address()},
          {"task", worker.has_task() ? nlohmann::ordered_json(task_name(worker)) : nullptr},
          {"registered_unix_ms", worker.registered_unix_ms()},
          {"last_heartbeat_unix_ms", worker.last_heartbeat_unix_ms()}};
}

}  // namespace

int run_workers_command(CoordinatorClient& client, OutputFormat format, std::ostream& out,
                        std::ostream& err) {
  // Every page, in registration order.
  v1::ListWorkersResponse response;
  v1::ListWorkersRequest request;
  do {
    v1::ListWorkersResponse page;
    const grpc::Status status = client.call(&v1::JobService::Stub::ListWorkers, request, page);
    if (!status.ok()) return client.report(status, "", err);
    for (v1::Worker& worker : *page.mutable_workers()) *response.add_workers() = std::move(worker);
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  if (format == OutputFormat::kJson) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const v1::Worker& worker : response.workers()) list.push_back(worker_json(worker));
    out << list.dump(2) << "\n";
    return kExitOk;
  }
  TextTable table({"ID", "HOST", "DATA ADDRESS", "STATE", "BACKEND", "CORES", "THREADS", "MEMORY",
                   "TASK", "LAST SEEN"});
  for (const v1::Worker& worker : response.workers()) {
    const v1::Resources& resources = worker.resources();
    table.add_row({worker.id(), worker.hostname(), worker.data_address(),
                   state_name(worker.state()), device_text(resources),
                   std::to_string(resources.cpu_cores()),
                   std::to_string(resources.threads()), gibibytes(resources.memory_bytes()),
                   task_name(worker), format_age(worker.last_heartbeat_unix_ms()) + " ago"});
  }
  table.print(out);
  return kExitOk;
}

}  // namespace mixtrain::cli
