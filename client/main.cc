// Why: entry point of the `mixtrain` CLI (DESIGN.md §3). Parses the global
// options and dispatches to one function per subcommand (the service
// commands are declared in service_cli.h). Exit codes: 0 success, 1 job
// failed or cancelled, 2 bad usage or an invalid spec, 3 coordinator
// unreachable or not authorized.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "client/env_command.h"
#include "client/export_command.h"
#include "client/plan_command.h"
#include "client/sample_command.h"
#include "client/service_cli.h"
#include "client/train_command.h"

int main(int argc, char** argv) {
  using mixtrain::cli::OutputFormat;
  CLI::App app{"mixtrain: distributed mixed-precision training"};
  app.require_subcommand(1);
  app.fallthrough();  // global options may follow the subcommand: `mixtrain jobs -o json`
  OutputFormat format = OutputFormat::kTable;
  app.add_option("-o,--output", format, "output format: table or json")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, OutputFormat>{{"table", OutputFormat::kTable},
                                              {"json", OutputFormat::kJson}},
          CLI::ignore_case));

  mixtrain::cli::SampleCommandArgs sample_args;
  CLI::App* sample = app.add_subcommand("sample", "continue a prompt with a trained checkpoint");
  sample->add_option("checkpoint", sample_args.checkpoint, "checkpoint directory")->required();
  sample->add_option("--prompt", sample_args.prompt, "text to continue");
  sample->add_option("--tokens", sample_args.tokens, "tokens to generate")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  sample->add_option("--temperature", sample_args.temperature, "softmax temperature (> 0)")
      ->check(CLI::PositiveNumber);
  sample->add_option("--top-k", sample_args.top_k, "sample among the k likeliest tokens")
      ->check(CLI::NonNegativeNumber);
  sample->add_option("--seed", sample_args.seed, "random seed");

  mixtrain::cli::ExportCommandArgs export_args;
  CLI::App* export_cmd =
      app.add_subcommand("export", "write a checkpoint's weights as a Hugging Face GPT-2 file");
  export_cmd->add_option("checkpoint", export_args.checkpoint, "checkpoint directory")->required();
  export_cmd->add_option("--format", export_args.format, "file format: safetensors");
  export_cmd->add_option("-O,--out", export_args.output, "file to write")->required();
  export_cmd->add_option("--dtype", export_args.dtype, "stored precision: fp32, fp16 or bf16");

  CLI::App* env = app.add_subcommand("env", "show what this build can use on this machine");

  mixtrain::cli::TrainCommandArgs train_args;
  CLI::App* train = app.add_subcommand("train", "run a job in this process, without a coordinator");
  train->add_option("spec", train_args.spec_path, "job spec (YAML)")->required();
  train->add_option("--set", train_args.overrides, "override a spec key: key.path=value")
      ->allow_extra_args(false);
  train->add_option("--resume", train_args.resume, "checkpoint directory to resume from");
  train->add_option("--summary-json", train_args.summary_json, "write the run summary here");
  train->add_option("--nproc", train_args.nproc,
                    "local data-parallel ranks (default: the spec's resources.workers)");
  train_args.argv.assign(argv, argv + argc);

  mixtrain::cli::PlanCommandArgs plan_args;
  CLI::App* plan = app.add_subcommand(
      "plan", "predict a job's memory per rank and the choices that fit a worker");
  plan->add_option("spec", plan_args.spec_path, "job spec (YAML)")->required();
  plan->add_option("--set", plan_args.overrides, "override a spec key: key.path=value")
      ->allow_extra_args(false);
  plan->add_option("--workers", plan_args.workers, "ranks (default: the spec's resources.workers)")
      ->check(CLI::Range(1, 1024));
  plan->add_option("--memory-per-worker", plan_args.memory_per_worker,
                   "memory of each worker, e.g. 80GiB (default on the CPU: what a worker on "
                   "this machine registers)");

  mixtrain::cli::ServiceCli service(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  const bool terminal = isatty(STDOUT_FILENO) != 0;
  if (const std::optional<int> code = service.run(format, terminal, std::cout, std::cerr)) {
    return *code;
  }
  if (env->parsed()) return mixtrain::cli::run_env_command(format, std::cout);
  if (plan->parsed())
    return mixtrain::cli::run_plan_command(plan_args, format, std::cout, std::cerr);
  if (export_cmd->parsed()) return mixtrain::cli::run_export_command(export_args, std::cerr);
  if (sample->parsed()) return mixtrain::cli::run_sample_command(sample_args, std::cout, std::cerr);
  if (train->parsed()) {
    return mixtrain::cli::run_train_command(train_args, terminal, std::cout, std::cerr);
  }
  return 2;
}
