// Why: see service_cli.h.
#include "client/service_cli.h"

#include "client/workers_command.h"
#include "net/token_file.h"

namespace mixtrain::cli {

ServiceCli::ServiceCli(CLI::App& app) {
  app.add_option("--coordinator", options_.coordinator, "coordinator address, HOST:PORT")
      ->envname("MIXTRAIN_COORDINATOR")
      ->capture_default_str();
  app.add_option("--token", options_.token, "the coordinator's bearer token")
      ->envname("MIXTRAIN_TOKEN");
  app.add_option("--token-file", token_file_,
                 "a file holding the token, read when --token is not given (e.g. the Docker "
                 "secret /run/secrets/auth-token)")
      ->envname("MIXTRAIN_TOKEN_FILE");
  app.add_option("--tls-ca", options_.tls_ca, "PEM CA that signed the coordinator's certificate")
      ->envname("MIXTRAIN_TLS_CA");

  submit_ = app.add_subcommand("submit", "hand a job to the coordinator");
  submit_->add_option("spec", submit_args_.spec_path, "job spec (YAML)")->required();
  submit_->add_option("--set", submit_args_.overrides, "override a spec key: key.path=value")
      ->allow_extra_args(false);
  submit_->add_option("--priority", submit_args_.priority,
                      "scheduling.priority: higher runs first and may preempt (0-1000)");
  submit_->add_flag("--follow", submit_args_.follow, "follow the job until it ends");

  local_ = app.add_subcommand("local", "run a job on a coordinator and workers on this machine");
  local_->add_option("spec", local_args_.spec_path, "job spec (YAML)")->required();
  local_
      ->add_option("--workers", local_args_.workers,
                   "workers to start (default: the spec's resources.workers)")
      ->check(CLI::Range(1, 1024));
  local_->add_option("--summary-json", local_args_.summary_json, "write the run summary here");
  local_->add_option("--keep-state", local_args_.keep_state,
                     "keep the database, logs and checkpoints in this directory");
  local_
      ->add_option("--http", local_args_.http,
                   "HOST:PORT of the coordinator's /metrics and /sd/workers, for a Prometheus "
                   "(port 0: a free one)")
      ->capture_default_str();

  jobs_ = app.add_subcommand("jobs", "list the coordinator's " + std::to_string(kRecentJobs) +
                                         " most recent jobs (--all: every job)");
  jobs_->add_flag("--all", list_all_jobs_, "list every job, however many");
  status_ = app.add_subcommand("status", "show one job");
  status_->add_option("id", job_id_, "job id")->required();
  cancel_ = app.add_subcommand("cancel", "cancel a queued or running job");
  cancel_->add_option("id", job_id_, "job id")->required();
  logs_ = app.add_subcommand("logs", "print a job's log lines");
  logs_->add_option("id", logs_args_.id, "job id")->required();
  logs_->add_flag("-f,--follow", logs_args_.follow, "keep printing until the job ends");
  logs_->add_option("--tail", logs_args_.tail, "only the last N stored lines")
      ->check(CLI::NonNegativeNumber);
  workers_ = app.add_subcommand("workers", "list the worker agents");
}

std::optional<int> ServiceCli::run(OutputFormat format, bool terminal, std::ostream& out,
                                   std::ostream& err) {
  if (local_->parsed()) return run_local_command(local_args_, format, terminal, out, err);
  if (!submit_->parsed() && !jobs_->parsed() && !status_->parsed() && !cancel_->parsed() &&
      !logs_->parsed() && !workers_->parsed()) {
    return std::nullopt;
  }
  options_.format = format;
  if (options_.token.empty() && !token_file_.empty()) {
    options_.token = net::read_token_file(token_file_);
    if (options_.token.empty()) {
      err << "mixtrain: cannot read --token-file " << token_file_
          << " (missing, unreadable or empty)\n";
      return kExitUsage;
    }
  }
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::connect(options_);
  if (!client.ok()) {
    err << "mixtrain: " << client.status().message() << "\n";
    return kExitUsage;
  }
  if (submit_->parsed()) {
    return run_submit_command(*client, submit_args_, format, terminal, out, err);
  }
  if (jobs_->parsed()) return run_jobs_command(*client, list_all_jobs_, format, out, err);
  if (status_->parsed()) return run_status_command(*client, job_id_, format, out, err);
  if (cancel_->parsed()) return run_cancel_command(*client, job_id_, format, out, err);
  if (logs_->parsed()) return run_logs_command(*client, logs_args_, format, out, err);
  return run_workers_command(*client, format, out, err);
}

}  // namespace mixtrain::cli
