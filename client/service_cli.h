// Why: the service commands of DESIGN.md §3 (submit, jobs, status, logs,
// cancel, workers, local) and their global options (--coordinator,
// --token, --token-file, --tls-ca, each with its environment variable) are declared
// here, apart from main.cc, which keeps the commands that need no
// coordinator.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <ostream>

#include "client/coordinator_client.h"
#include "client/job_commands.h"
#include "client/local_command.h"
#include "client/logs_command.h"
#include "client/submit_command.h"

namespace mixtrain::cli {

class ServiceCli {
 public:
  // Adds the global options and the service subcommands to `app`, which
  // must outlive this object.
  explicit ServiceCli(CLI::App& app);

  // Runs the service subcommand that was parsed and returns its exit code;
  // nullopt when none was. `format` is the global -o.
  std::optional<int> run(OutputFormat format, bool terminal, std::ostream& out, std::ostream& err);

 private:
  ServiceOptions options_;
  std::string token_file_;  // --token-file: read into options_.token when no --token
  SubmitCommandArgs submit_args_;
  LocalCommandArgs local_args_;
  LogsCommandArgs logs_args_;
  std::string job_id_;  // status and cancel
  CLI::App* submit_ = nullptr;
  CLI::App* local_ = nullptr;
  CLI::App* jobs_ = nullptr;
  bool list_all_jobs_ = false;
  CLI::App* status_ = nullptr;
  CLI::App* logs_ = nullptr;
  CLI::App* cancel_ = nullptr;
  CLI::App* workers_ = nullptr;
};

}  // namespace mixtrain::cli
