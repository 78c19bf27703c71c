// Why: entry point of the `mixtrain` CLI (DESIGN.md §3). Parses the global
// options and dispatches to one function per subcommand. Exit codes: 0
// success, 1 job failed, 2 bad usage, 3 coordinator unreachable.
#include <CLI/CLI.hpp>
#include <iostream>

#include "env_command.h"

int main(int argc, char** argv) {
  using mixtrain::cli::OutputFormat;
  CLI::App app{"mixtrain: distributed mixed-precision training"};
  app.require_subcommand(1);
  OutputFormat format = OutputFormat::kTable;
  app.add_option("-o,--output", format, "output format: table or json")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, OutputFormat>{{"table", OutputFormat::kTable},
                                              {"json", OutputFormat::kJson}},
          CLI::ignore_case));

  CLI::App* env = app.add_subcommand("env", "show what this build can use on this machine");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (env->parsed()) return mixtrain::cli::run_env_command(format, std::cout);
  return 2;
}
