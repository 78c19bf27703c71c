// Why: the worker agent (DESIGN.md §1, §3) is what the coordinator
// schedules onto: it registers this machine, heartbeats, takes task
// commands from a long-lived stream, runs one rank at a time in a child
// process (task_runner.h), reports progress, logs and outcomes
// (reporter.h) and serves /metrics (worker_metrics.h). When the
// coordinator goes away it reconnects with backoff and registers again
// with its previous id and its running task, which keeps running
// untouched; a call refused for wrong credentials registers again too. It
// never exits on bad input; only stop() ends run().
#pragma once

#include <chrono>
#include <memory>
#include <ostream>
#include <string>

#include <absl/base/thread_annotations.h>
#include <absl/status/statusor.h>
#include <absl/synchronization/mutex.h>
#include "net/http_server.h"
#include "worker/reporter.h"
#include "worker/task_runner.h"
#include "worker/worker_connection.h"
#include "worker/worker_metrics.h"

namespace mixtrain::worker {

struct AgentOptions {
  ConnectionOptions connection;
  std::string metrics_listen = "0.0.0.0:9401";
  std::string advertise_host;                 // empty: the data address
  // Where this worker's ranks bind and peers connect: an address or an
  // interface (whose address is used); both empty: the local end of the
  // route to the coordinator.
  std::string data_address;
  std::string data_iface;
  int threads = 0;  // CPU threads per rank; 0: as the coordinator sizes them (Task.threads)
  // Bytes this worker's ranks may use, registered as its memory (what the
  // coordinator plans against); 0: the machine's less a reserve.
  int64_t memory_limit = 0;
  std::string backend = "cpu";                // resolved: "cpu" or "cuda:N"
  double peak_flops = 0.0;                    // for MFU; 0: estimated_peak_flops
  std::string executable = "/proc/self/exe";  // started in task mode for each task
};

class Agent {
 public:
  // Opens the channel and the /metrics endpoint. INVALID_ARGUMENT for a
  // bad address or TLS CA file, UNAVAILABLE when the metrics port cannot
  // be bound. `log` receives the agent's own lines and must outlive it.
  static absl::StatusOr<std::unique_ptr<Agent>> create(AgentOptions options, std::ostream& log);
  // Stops and waits for everything the agent started.
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Registers, serves task commands and heartbeats until stop(); then
  // cancels the running task, waits for its process, delivers its final
  // report (for up to 10 s) and deregisters (a scale-down leaves no LOST
  // worker behind). Returns the coordinator's refusal
  // (INVALID_ARGUMENT) when it will never accept this worker as
  // configured (a loopback data address seen from another host), else OK.
  absl::Status run();
  // Makes run() return soon; safe from any thread (a signal thread).
  void stop();

  int metrics_port() const { return http_->port(); }

 private:
  Agent(AgentOptions options, std::ostream& log, std::unique_ptr<WorkerConnection> connection);

  // The address this worker's ranks bind and advertise, and the
  // interface holding it ("" when unknown).
  absl::StatusOr<std::pair<std::string, std::string>> data_endpoint() const;
  // One Register call; sets worker_id_ and the data endpoint on success.
  grpc::Status register_worker();
  // Reads task commands until the stream ends; returns its status.
  grpc::Status serve_tasks(const std::string& worker_id);
  void handle(const v1::TaskCommand& command);
  void start_task(const v1::Task& task);
  void heartbeat_loop();
  // Tells the coordinator this worker leaves (once stopping); logged.
  void deregister() ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the running rank once the coordinator has not been reached for
  // its worker timeout: by then it counts this worker lost and restarts the
  // job elsewhere, and the old rank must not train (and checkpoint) on. A
  // coordinator that is down (its host refuses connections) is not one
  // that could restart the job; see kRefusalCredit.
  void fence_loop();
  // A call sent at `sent` reached the coordinator, which knows this worker
  // (or proved, by a refusal, that no coordinator runs: `sent` is then
  // moved by kRefusalCredit).
  void contacted(std::chrono::steady_clock::time_point sent) ABSL_LOCKS_EXCLUDED(mu_);
  // The coordinator did not know `unknown_id` (it restarted): asks for a new
  // registration, which ends the task stream, unless this agent has
  // registered anew since that id was sent (a late answer to an older call
  // must not cost a second registration).
  void request_reregister(const std::string& unknown_id);
  // What heartbeats and registrations list as running: the task that runs
  // now, if any, and every task whose final outcome the coordinator has
  // not taken yet (so it does not take the task for one that vanished).
  std::vector<v1::RunningTask> listed_tasks() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits up to `delay` or until stop().
  void sleep(std::chrono::milliseconds delay) ABSL_LOCKS_EXCLUDED(mu_);
  void say(const std::string& line) ABSL_LOCKS_EXCLUDED(log_mu_);

  const AgentOptions options_;
  std::ostream& log_;
  absl::Mutex log_mu_;
  const std::unique_ptr<WorkerConnection> connection_;
  const v1::Resources resources_;
  const std::string hostname_;
  WorkerMetrics metrics_;
  std::unique_ptr<net::HttpServer> http_;  // serves metrics_

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool need_register_ ABSL_GUARDED_BY(mu_) = true;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);  // the last id the coordinator gave
  std::string data_address_ ABSL_GUARDED_BY(mu_);  // as last registered
  std::string data_iface_ ABSL_GUARDED_BY(mu_);
  std::chrono::milliseconds heartbeat_interval_ ABSL_GUARDED_BY(mu_){2000};
  std::chrono::milliseconds worker_timeout_ ABSL_GUARDED_BY(mu_){0};  // 0: not told yet
  // When the latest call that reached the coordinator was sent.
  std::chrono::steady_clock::time_point last_contact_ ABSL_GUARDED_BY(mu_);
  grpc::ClientContext* stream_context_ ABSL_GUARDED_BY(mu_) = nullptr;  // the open task stream
  // Declared after mu_ (it calls request_reregister) and before runner_
  // (whose last event it receives), so destruction goes runner, reporter, mu_.
  Reporter reporter_;
  std::unique_ptr<TaskRunner> runner_ ABSL_GUARDED_BY(mu_);  // the current or last task
};

}  // namespace mixtrain::worker
