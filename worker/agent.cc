// Why: see agent.h.
#include "worker/agent.h"

#include <algorithm>
#include <optional>
#include <thread>

#include "engine/common/host_port.h"
#include "engine/common/json.h"
#include "engine/common/usable_cores.h"
#include "net/backoff.h"
#include "net/net_address.h"
#include "net/service_timing.h"
#include "proto/running_task.h"
#include "worker/resources.h"
#include "worker/task_progress.h"

namespace mixtrain::worker {
namespace {

// The threads of the rank of `task`: what the coordinator sized, else the
// worker's own --threads, else every core this process may use (an older
// coordinator, which sizes nothing).
int rank_threads(const v1::Task& task, int own_threads) {
  if (task.threads() > 0) return task.threads();
  return own_threads > 0 ? own_threads : usable_cores();
}

constexpr std::chrono::milliseconds kCallTimeout{10000};
// The task stream carries a deadline like every call; it is reopened when it passes.
constexpr std::chrono::hours kStreamTimeout{24};
// A stream that stayed up this long was a success: the next reconnect starts fast.
constexpr std::chrono::seconds kHealthyStream{10};
constexpr std::chrono::seconds kFinalReportTimeout{10};
constexpr std::chrono::seconds kDeregisterTimeout{2};
// A heartbeat refused at its connection ("Connection refused") proves no
// coordinator listened there when the channel last tried to connect, at
// most its reconnect backoff (net::kReconnectCap, plus jitter) before the
// call was sent. A coordinator started after that gives the ranks of its
// running jobs one worker timeout plus net::kRestartReconnectMargin
// (scheduler.cc) to come back before it restarts
// them elsewhere, so such a refusal lets this worker's rank run on as if
// the coordinator had been reached this long after the call was sent: a
// coordinator restart does not stop training, a partition still does.
constexpr std::chrono::milliseconds kRefusalCredit = net::kReconnectCap;

// Whether `status` says the coordinator's address refused the connection.
bool refused_by_coordinator_host(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE &&
         status.error_message().find("Connection refused") != std::string::npos;
}

std::string task_name(const v1::Task& task) {
  return "job " + task.job_id() + " attempt " + std::to_string(task.attempt()) + " rank " +
         std::to_string(task.rank());
}

// Why a task command cannot be run; empty when it can.
std::string task_problem(const v1::Task& task) {
  if (task.job_id().empty()) return "no job_id";
  if (task.world_size() < 1) return "world_size " + std::to_string(task.world_size());
  if (task.rank() < 0 || task.rank() >= task.world_size())
    return "rank " + std::to_string(task.rank()) + " outside world_size " +
           std::to_string(task.world_size());
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<Agent>> Agent::create(AgentOptions options, std::ostream& log) {
  absl::StatusOr<std::unique_ptr<WorkerConnection>> connection =
      WorkerConnection::open(options.connection);
  if (!connection.ok()) return connection.status();
  const std::string listen = options.metrics_listen;
  std::unique_ptr<Agent> agent(new Agent(std::move(options), log, std::move(*connection)));
  Agent* self = agent.get();
  absl::StatusOr<std::unique_ptr<net::HttpServer>> http = net::HttpServer::start(
      listen, {{"/metrics", [self] {
                  return net::HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8",
                                           self->metrics_.render()};
                }}});
  if (!http.ok()) return http.status();
  agent->http_ = std::move(*http);
  return agent;
}

Agent::Agent(AgentOptions options, std::ostream& log, std::unique_ptr<WorkerConnection> connection)
    : options_(std::move(options)),
      log_(log),
      connection_(std::move(connection)),
      resources_([this] {
        v1::Resources resources = detect_resources(options_.backend);
        resources.set_threads(options_.threads);
        resources.set_memory_bytes(options_.memory_limit > 0
                                       ? options_.memory_limit
                                       : default_memory_limit(resources.memory_bytes()));
        return resources;
      }()),
      hostname_(hostname()),
      reporter_(
          *connection_, [this](const std::string& id) { request_reregister(id); },
          [this](std::chrono::steady_clock::time_point sent) { contacted(sent); }) {}

Agent::~Agent() {
  stop();
  std::unique_ptr<TaskRunner> runner;
  {
    absl::MutexLock lock(&mu_);
    runner = std::move(runner_);
  }
}

void Agent::say(const std::string& line) {
  absl::MutexLock lock(&log_mu_);
  log_ << line << std::endl;
}

void Agent::stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  if (stream_context_ != nullptr) stream_context_->TryCancel();
}

void Agent::sleep(std::chrono::milliseconds delay) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(delay));
}

void Agent::request_reregister(const std::string& unknown_id) {
  absl::MutexLock lock(&mu_);
  if (need_register_ || worker_id_ != unknown_id) return;
  need_register_ = true;
  if (stream_context_ != nullptr) stream_context_->TryCancel();
}

std::vector<v1::RunningTask> Agent::listed_tasks() {
  std::vector<v1::RunningTask> tasks = reporter_.unreported_finals();
  absl::MutexLock lock(&mu_);
  if (!runner_ || runner_->finished()) return tasks;
  const v1::RunningTask running = v1::running_of(runner_->task());
  if (std::none_of(tasks.begin(), tasks.end(),
                   [&](const v1::RunningTask& t) { return same_task(t, running); })) {
    tasks.push_back(running);
  }
  return tasks;
}

absl::StatusOr<std::pair<std::string, std::string>> Agent::data_endpoint() const {
  if (!options_.data_iface.empty()) {
    const absl::StatusOr<std::string> address = net::interface_address(options_.data_iface);
    if (!address.ok()) {
      return absl::InvalidArgumentError("--data-iface: " + std::string(address.status().message()));
    }
    return std::make_pair(*address, options_.data_iface);
  }
  std::string address = options_.data_address;
  if (address.empty()) {
    const absl::StatusOr<std::string> routed =
        net::route_source_address(options_.connection.address);
    if (!routed.ok()) return routed.status();
    address = *routed;
  }
  return std::make_pair(address, net::interface_holding(address));
}

grpc::Status Agent::register_worker() {
  const absl::StatusOr<std::pair<std::string, std::string>> endpoint = data_endpoint();
  if (!endpoint.ok()) {
    return grpc::Status(endpoint.status().code() == absl::StatusCode::kInvalidArgument
                            ? grpc::StatusCode::INVALID_ARGUMENT
                            : grpc::StatusCode::UNAVAILABLE,
                        std::string(endpoint.status().message()));
  }
  const std::string& data_address = endpoint->first;
  std::string host = options_.advertise_host.empty() ? data_address : options_.advertise_host;
  // What this host's own resolver makes of the names (Debian maps the
  // hostname to 127.0.1.1): refused here, before the coordinator sees it.
  if (const absl::StatusOr<std::string> seen_from =
          net::route_source_address(options_.connection.address);
      seen_from.ok()) {
    absl::Status reachable = net::check_reachable_from_other_hosts(
        "the data address", data_address, *seen_from, net::kDataAddressFix);
    if (reachable.ok()) {
      reachable = net::check_reachable_from_other_hosts("the metrics address host", host,
                                                        *seen_from, net::kMetricsAddressFix);
    }
    if (!reachable.ok()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(reachable.message()));
    }
  }
  if (host.find(':') != std::string::npos) host = "[" + host + "]";  // IPv6
  v1::RegisterRequest request;
  request.set_hostname(hostname_);
  request.set_metrics_address(join_host_port(host, metrics_port()));
  request.set_data_address(data_address);
  *request.mutable_resources() = resources_;
  {
    absl::MutexLock lock(&mu_);
    request.set_previous_worker_id(worker_id_);
  }
  request.set_previous_worker_secret(connection_->options().worker_secret);
  for (const v1::RunningTask& task : listed_tasks()) *request.add_running() = task;
  grpc::ClientContext context;
  connection_->prepare(context, kCallTimeout);
  v1::RegisterResponse response;
  const auto sent = std::chrono::steady_clock::now();
  const grpc::Status status = connection_->stub().Register(&context, request, &response);
  if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
    // Our id is known there under other credentials: register as a new worker.
    say("mixtrain-worker: " + status.error_message() + "; registering as a new worker");
    absl::MutexLock lock(&mu_);
    worker_id_.clear();
    connection_->set_identity("", "");
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, status.error_message());
  }
  if (!status.ok()) return status;
  connection_->set_identity(response.worker_id(), response.worker_secret());
  contacted(sent);
  {
    absl::MutexLock lock(&mu_);
    worker_timeout_ = std::chrono::milliseconds(response.worker_timeout_ms());
    worker_id_ = response.worker_id();
    data_address_ = endpoint->first;
    data_iface_ = endpoint->second;
    need_register_ = false;
    if (response.heartbeat_interval_ms() > 0)
      heartbeat_interval_ = std::chrono::milliseconds(response.heartbeat_interval_ms());
  }
  reporter_.set_worker_id(response.worker_id());
  metrics_.set_connected(true);
  say("mixtrain-worker: registered as " + response.worker_id() + " with " +
      options_.connection.address + ", data address " + data_address + ", metrics on port " +
      std::to_string(metrics_port()));
  return status;
}

absl::Status Agent::run() {
  say("mixtrain-worker: metrics on port " + std::to_string(metrics_port()) + ", registering with " +
      options_.connection.address);
  std::thread heartbeats([this] { heartbeat_loop(); });
  std::thread fence([this] { fence_loop(); });
  net::Backoff backoff;
  bool outage_reported = false;
  absl::Status refused;
  while (true) {
    bool reregister = false;
    std::string id;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      reregister = need_register_;
      id = worker_id_;
    }
    if (reregister) {
      const grpc::Status status = register_worker();
      if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
        say("mixtrain-worker: registration refused: " + status.error_message());
        refused = absl::InvalidArgumentError(status.error_message());
        stop();
        continue;
      }
      if (!status.ok()) {
        if (!outage_reported) {
          say("mixtrain-worker: cannot register with " + options_.connection.address + ": " +
              status.error_message() + "; retrying");
          outage_reported = true;
        }
        sleep(backoff.next().value());
        continue;
      }
      outage_reported = false;
      backoff.reset();
      continue;
    }
    const auto opened = std::chrono::steady_clock::now();
    const grpc::Status status = serve_tasks(id);
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      if (need_register_) continue;  // request_reregister ended the stream
      if (status.error_code() == grpc::StatusCode::NOT_FOUND ||
          status.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
        need_register_ = true;
        continue;
      }
    }
    metrics_.set_connected(false);
    if (std::chrono::steady_clock::now() - opened > kHealthyStream) {  // a new outage
      backoff.reset();
      outage_reported = false;
    }
    if (!outage_reported) {
      say("mixtrain-worker: lost the task stream from " + options_.connection.address + ": " +
          status.error_message() + "; reconnecting");
      outage_reported = true;
    }
    sleep(backoff.next().value());
  }
  heartbeats.join();
  fence.join();
  std::unique_ptr<TaskRunner> runner;
  {
    absl::MutexLock lock(&mu_);
    runner = std::move(runner_);
  }
  runner.reset();  // cancels a running task and waits for its final event
  if (!reporter_.flush(kFinalReportTimeout))
    say("mixtrain-worker: stopping with reports the coordinator did not take");
  deregister();
  return refused;
}

void Agent::deregister() {
  v1::DeregisterRequest request;
  {
    absl::MutexLock lock(&mu_);
    if (need_register_ || worker_id_.empty()) return;
    request.set_worker_id(worker_id_);
  }
  grpc::ClientContext context;
  connection_->prepare(context, kDeregisterTimeout);
  v1::DeregisterResponse response;
  const grpc::Status status = connection_->stub().Deregister(&context, request, &response);
  say("mixtrain-worker: " +
      (status.ok() ? "deregistered " + request.worker_id()
                   : "could not deregister " + request.worker_id() + ": " + status.error_message() +
                         "; the coordinator counts it lost"));
}

grpc::Status Agent::serve_tasks(const std::string& worker_id) {
  grpc::ClientContext context;
  connection_->prepare(context, kStreamTimeout);
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ || need_register_) return grpc::Status::CANCELLED;
    stream_context_ = &context;
  }
  v1::TasksRequest request;
  request.set_worker_id(worker_id);
  std::unique_ptr<grpc::ClientReader<v1::TaskCommand>> reader =
      connection_->stub().Tasks(&context, request);
  v1::TaskCommand command;
  while (reader->Read(&command)) handle(command);
  const grpc::Status status = reader->Finish();
  absl::MutexLock lock(&mu_);
  stream_context_ = nullptr;
  return status;
}

void Agent::handle(const v1::TaskCommand& command) {
  if (command.has_start()) {
    start_task(command.start());
    return;
  }
  if (!command.has_cancel() && !command.has_preempt()) {
    say("mixtrain-worker: ignoring an empty task command");
    return;
  }
  const bool preempt = command.has_preempt();
  const v1::CancelTask& stop = preempt ? command.preempt() : command.cancel();
  const char* verb = preempt ? "preempting" : "cancelling";
  absl::MutexLock lock(&mu_);
  if (runner_ && !runner_->finished() && runner_->task().job_id() == stop.job_id() &&
      runner_->task().attempt() == stop.attempt()) {
    say(std::string("mixtrain-worker: ") + verb + " " + task_name(runner_->task()) + ": " +
        stop.reason());
    if (preempt) {
      runner_->preempt();
    } else {
      runner_->cancel(stop.reason());
    }
  } else {
    say(std::string("mixtrain-worker: ignoring ") + (preempt ? "preemption" : "cancel") +
        " of job " + stop.job_id() + " attempt " + std::to_string(stop.attempt()) +
        ": not running it");
  }
}

void Agent::start_task(const v1::Task& task) {
  absl::MutexLock lock(&mu_);
  const v1::RunningTask running = v1::running_of(task);
  if (runner_ && same_task(running, v1::running_of(runner_->task()))) {
    // The coordinator writes a start again on every new stream until it
    // sees the task listed: this one already runs (or ran) here.
    say("mixtrain-worker: " + task_name(task) + " was started here already");
    return;
  }
  if (runner_ && !runner_->exited()) {
    // Refused at once, so that its attempt fails now rather than after the
    // other ranks' rendezvous timeout. A runner whose process ended is
    // not refused for: the coordinator may answer its final report with
    // the next task before on_finished has returned.
    const std::string problem = "this worker still runs " + task_name(runner_->task());
    say("mixtrain-worker: refusing " + task_name(task) + ": " + problem);
    reporter_.finish(running, v1::TASK_OUTCOME_FAILED, problem, "");
    return;
  }
  // The last task's process ended; wait for its last event (its final
  // report and the removal of its series) before the next task begins.
  runner_.reset();
  if (const std::string problem = task_problem(task); !problem.empty()) {
    say("mixtrain-worker: refusing " + task_name(task) + ": " + problem);
    reporter_.finish(running, v1::TASK_OUTCOME_FAILED, "invalid task: " + problem, "");
    return;
  }
  const double peak =
      options_.peak_flops > 0 ? options_.peak_flops : estimated_peak_flops(resources_);
  const std::optional<double> min_loss_scale =
      task.has_min_loss_scale() ? std::optional<double>(task.min_loss_scale()) : std::nullopt;
  metrics_.begin_task({task.job_id(), task.rank(), peak, min_loss_scale});
  auto progress = std::make_shared<TaskProgress>();  // used on the runner's thread only
  TaskEvents events;
  events.on_step = [this, running, progress](const StepReport& step) {
    metrics_.on_step(step);
    progress->on_step(step.progress);
    reporter_.progress(running, progress->progress());
  };
  events.on_eval = [this, running, progress](const EvalProgress& eval) {
    metrics_.on_eval(eval);
    progress->on_eval(eval);
    reporter_.progress(running, progress->progress());
  };
  events.on_eval_batch = [this, running, progress](const EvalBatchProgress& eval_batch) {
    progress->on_eval_batch(eval_batch);
    reporter_.progress(running, progress->progress());
  };
  const std::string prefix = "[" + task.job_id() + " rank " + std::to_string(task.rank()) + "] ";
  events.on_output = [this, running, prefix](const std::string& line) {
    reporter_.log(running, line);
    say(prefix + line);
  };
  events.on_finished = [this, running, progress, name = task_name(task)](const TaskResult& result) {
    metrics_.end_task(result.outcome);
    std::string summary_json;
    if (result.summary) {
      progress->on_summary(*result.summary);
      reporter_.progress(running, progress->progress());
      summary_json = dump_json(result.summary->to_json());
    }
    reporter_.finish(running, result.outcome, result.message, summary_json);
    say("mixtrain-worker: " + name + " " + task_outcome_label(result.outcome) +
        (result.message.empty() ? "" : ": " + result.message));
  };
  say("mixtrain-worker: starting " + task_name(task) + " of " + std::to_string(task.world_size()));
  TaskLaunch launch{.task = task,
                    .backend = options_.backend,
                    .connection = connection_->options(),
                    .data_address = data_address_,
                    .data_iface = data_iface_,
                    .threads = rank_threads(task, options_.threads),
                    .memory_limit = resources_.memory_bytes()};
  runner_ = std::make_unique<TaskRunner>(options_.executable, std::move(launch), std::move(events));
}

void Agent::heartbeat_loop() {
  std::optional<std::chrono::steady_clock::time_point> failing_since;
  while (true) {
    std::chrono::milliseconds interval;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      interval = heartbeat_interval_;
    }
    sleep(interval);
    std::string id;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      if (need_register_) continue;
      id = worker_id_;
    }
    v1::HeartbeatRequest request;
    request.set_worker_id(id);
    for (const v1::RunningTask& task : listed_tasks()) *request.add_running() = task;
    grpc::ClientContext context;
    connection_->prepare(context, std::min(kCallTimeout, 2 * interval));
    v1::HeartbeatResponse response;
    const auto sent = std::chrono::steady_clock::now();
    const grpc::Status status = connection_->stub().Heartbeat(&context, request, &response);
    metrics_.set_connected(status.ok() && !response.reregister());
    if (status.ok() && !response.reregister()) contacted(sent);
    if (refused_by_coordinator_host(status)) contacted(sent + kRefusalCredit);
    // Said once when heartbeats start failing and once when they are back.
    if (!status.ok() && !failing_since) {
      failing_since = sent;
      say("mixtrain-worker: heartbeats to " + options_.connection.address +
          " failing: " + status.error_message());
    } else if (status.ok() && failing_since) {
      say("mixtrain-worker: heartbeats answered again after " +
          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - *failing_since)
                             .count()) +
          " ms");
      failing_since.reset();
    }
    if ((status.ok() && response.reregister()) ||
        status.error_code() == grpc::StatusCode::NOT_FOUND ||
        status.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      say("mixtrain-worker: the coordinator does not know worker " + id +
          (status.ok() ? "" : " (" + status.error_message() + ")") + "; registering again");
      request_reregister(id);
    }
  }
}

void Agent::contacted(std::chrono::steady_clock::time_point sent) {
  absl::MutexLock lock(&mu_);
  last_contact_ = std::max(last_contact_, sent);
}

void Agent::fence_loop() {
  // Checked this often; the coordinator notices a silent worker no sooner
  // than its timeout after the worker's last call was sent.
  constexpr std::chrono::milliseconds kCheckEvery{100};
  std::string fenced;  // the task already stopped, said once
  while (true) {
    sleep(kCheckEvery);
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    if (!runner_ || runner_->finished() || task_name(runner_->task()) == fenced ||
        worker_timeout_.count() <= 0) {
      continue;
    }
    const auto silent = std::chrono::steady_clock::now() - last_contact_;
    if (silent < worker_timeout_) continue;
    fenced = task_name(runner_->task());
    const std::string reason =
        "this worker has not reached the coordinator for " +
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(silent).count()) +
        " ms (its worker timeout is " + std::to_string(worker_timeout_.count()) +
        " ms): the attempt is given up, its rank stops";
    say("mixtrain-worker: stopping " + task_name(runner_->task()) + ": " + reason);
    runner_->cancel(reason);
  }
}

}  // namespace mixtrain::worker
