// Why: implementation of `mixtrain train` (see train_command.h).
#include "train_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "job_spec_yaml.h"
#include "progress_printer.h"
#include "train/trainer.h"

namespace mixtrain::cli {
namespace {

// Writes the summary as indented JSON to `path` (through a temporary file
// and a rename, so a reader never sees half of it). Returns false and
// reports to `err` when it cannot.
bool write_summary(const TrainSummary& summary, const std::string& path, std::ostream& err) {
  const std::string text = nlohmann::ordered_json::parse(summary.to_json().dump()).dump(2) + "\n";
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << text;
    if (!file.good()) {
      err << "mixtrain train: cannot write --summary-json " << path << "\n";
      return false;
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    err << "mixtrain train: cannot write --summary-json " << path << ": " << error.message()
        << "\n";
    return false;
  }
  return true;
}

// One line closing the run: what it reached and where it left its weights.
void print_outcome(const TrainSummary& summary, const std::filesystem::path& checkpoints,
                   std::ostream& out) {
  char text[256];
  std::snprintf(text, sizeof(text), "%s: %s after %lld steps (%lld skipped), %.0f tok/s",
                summary.name.c_str(), summary.status.c_str(),
                static_cast<long long>(summary.steps),
                static_cast<long long>(summary.skipped_steps), summary.tokens_per_second);
  out << text;
  if (summary.final_train_loss) out << ", train loss " << *summary.final_train_loss;
  if (summary.final_val_loss) out << ", val loss " << *summary.final_val_loss;
  out << "\ncheckpoints: " << checkpoints.string() << "\n";
}

}  // namespace

int run_train_command(const TrainCommandArgs& args, bool terminal, std::ostream& out,
                      std::ostream& err) {
  JobSpecOptions options;
  options.overrides = args.overrides;
  options.check_files = true;
  const JobSpecResult loaded = load_job_spec_file(args.spec_path, options);
  if (!loaded.ok()) {
    for (const JobSpecError& error : loaded.errors) err << error.to_string() << "\n";
    return 2;
  }
  const config::JobSpec& spec = *loaded.spec;
  if (args.summary_json) {  // found now, not after the whole run
    std::error_code error;
    const std::filesystem::path parent =
        std::filesystem::absolute(*args.summary_json, error).parent_path();
    if (!std::filesystem::is_directory(parent, error)) {
      err << "mixtrain train: cannot write --summary-json " << *args.summary_json
          << ": no directory " << parent.string() << "\n";
      return 2;
    }
  }

  std::unique_ptr<Backend> backend;
  try {
    backend = make_backend(config::enum_name(spec.resources.backend));
  } catch (const EngineError& e) {
    err << args.spec_path << ": resources.backend: " << e.what() << "\n";
    return 2;
  }

  ProgressPrinter printer(out, terminal);
  TrainerOptions trainer_options;
  trainer_options.progress = printer.callbacks();
  if (args.resume) trainer_options.resume_dir = *args.resume;
  std::unique_ptr<Trainer> trainer;
  try {
    trainer = std::make_unique<Trainer>(*backend, spec, trainer_options);
  } catch (const EngineError& e) {
    err << "mixtrain train: " << e.what() << "\n";
    return e.code() == ErrorCode::kInvalidArgument ? 2 : 1;
  }

  TrainSummary summary;
  int exit_code = 0;
  try {
    summary = trainer->run();
  } catch (const std::exception& e) {
    printer.finish();
    err << "mixtrain train: " << e.what() << "\n";
    summary = trainer->summary("failed");
    exit_code = 1;
  }
  printer.finish();
  print_outcome(summary, trainer->checkpoint_dir(), out);
  if (args.summary_json && !write_summary(summary, *args.summary_json, err)) exit_code = 1;
  return exit_code;
}

}  // namespace mixtrain::cli
