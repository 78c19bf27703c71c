// Why: implementation of `mixtrain train` (see train_command.h).
#include "client/train_command.h"

#include <cstdio>
#include <filesystem>
#include <memory>

#include "client/text_table.h"
#include "engine/backend/backend.h"
#include "engine/checkpoint/checkpoint_store.h"
#include "engine/comm/make_communicator.h"
#include "engine/comm/tcp_store.h"
#include "engine/common/machine_memory.h"
#include "engine/plan/plan_alternatives.h"
#include "engine/train/trainer.h"
#include "jobspec/job_spec_yaml.h"
#include "launch/local_ranks.h"
#include "launch/progress_printer.h"
#include "launch/run_trainer.h"
#include "launch/summary_file.h"

#ifdef MIXTRAIN_WITH_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#endif

namespace mixtrain::cli {
namespace {

// One line closing the run: what it reached and where it left its weights.
void print_outcome(const TrainSummary& summary, const std::filesystem::path& checkpoints,
                   std::ostream& out) {
  char text[256];
  std::snprintf(text, sizeof(text), "%s: %s after %lld steps (%lld skipped), %.0f tok/s",
                summary.name.c_str(), summary.status.c_str(), static_cast<long long>(summary.steps),
                static_cast<long long>(summary.skipped_steps), summary.tokens_per_second);
  out << text;
  if (summary.final_train_loss) out << ", train loss " << *summary.final_train_loss;
  if (summary.final_val_loss) out << ", val loss " << *summary.final_val_loss;
  out << "\ncheckpoints: " << checkpoints.string() << "\n";
}

// This process's place in a data-parallel group: the store and the
// communicator of a rank started by run_local_ranks.
struct RankGroup {
  launch::RankEnvironment env;
  std::unique_ptr<TcpStoreClient> store;
  std::unique_ptr<Communicator> comm;
};

std::string summary_key(int rank) { return "summary/rank/" + std::to_string(rank); }

// Rank 0 collects every other rank's summary and merges them as the
// coordinator does; the others hand theirs over. A rank that never reports
// (it died) is left out after the timeout.
void exchange_rank_summaries(RankGroup& group, TrainSummary& summary, std::ostream& err) {
  if (group.env.rank != 0) {
    group.store->set(summary_key(group.env.rank), dump_json(summary.to_json()));
    return;
  }
  std::vector<TrainSummary> summaries{summary};
  for (int rank = 1; rank < group.env.world_size; ++rank) {
    try {
      summaries.push_back(TrainSummary::from_json(
          parse_json(group.store->get(summary_key(rank), group.env.timeout))));
    } catch (const EngineError& e) {
      err << "mixtrain train: rank " << rank << " left no summary: " << e.what() << "\n";
    }
  }
  summary = merge_rank_summaries(std::move(summaries));
}

// The newest intact checkpoint in `dir` past `step`, which a run resumed at
// `step` would have to write again: it would train up to there and then
// fail with "already exists", losing the work, so such a run is refused at
// its start. Damaged ones are set aside when their step is written.
std::optional<CheckpointInfo> intact_checkpoint_past(const std::filesystem::path& dir,
                                                     int64_t step) {
  const std::vector<CheckpointInfo> listed = list_checkpoints(dir);
  for (auto it = listed.rbegin(); it != listed.rend() && it->step > step; ++it) {
    if (!checkpoint_damage(it->path)) return *it;
  }
  return std::nullopt;
}

// The memory a rank may use here, as a worker on this machine would
// register it (its default --memory-limit): on the CPU backend the RAM,
// shared by the local ranks; on a GPU its memory, and the RAM for offload.
plan::MemoryBudget local_rank_budget(const Backend& backend, int world_size) {
  const int64_t ram = default_memory_limit(machine_memory_bytes()) / world_size;
#ifdef MIXTRAIN_WITH_CUDA
  if (backend.device_type() == DeviceType::kCuda)
    return {.device = cuda_device_info(backend.device_index()).memory_bytes, .host = ram};
#endif
  return {.device = ram, .shared = backend.device_type() != DeviceType::kCuda};
}

// `spec` with its `auto` keys chosen for this machine, said on `out`;
// nullopt (said on `err`) when no choice fits.
std::optional<config::JobSpec> choose_here(const config::JobSpec& spec, const Backend& backend,
                                           int world_size, bool leader, std::ostream& out,
                                           std::ostream& err) {
  plan::PlanTarget target = plan::cpu_target(world_size);
  target.cuda = backend.device_type() == DeviceType::kCuda;
  const plan::MemoryBudget budget = local_rank_budget(backend, world_size);
  const std::optional<plan::PlanAlternative> chosen =
      plan::choose_configuration(spec, target, budget);
  const std::string keys = config::auto_key_names(spec.auto_keys);
  if (!chosen) {
    if (leader) {
      err << "mixtrain train: no choice of " << keys << " (auto) fits the "
          << format_bytes(static_cast<double>(budget.device)) << " a rank may use here\n";
    }
    return std::nullopt;
  }
  if (leader) {
    out << "auto chose " << plan::describe_auto(chosen->choice, spec.auto_keys) << " (fits "
        << format_bytes(static_cast<double>(budget.device)) << " per rank)\n";
  }
  return plan::with_choice(spec, chosen->choice);
}

}  // namespace

int run_train_command(const TrainCommandArgs& args, bool terminal, std::ostream& out,
                      std::ostream& err) {
  jobspec::JobSpecOptions options;
  options.overrides = args.overrides;
  options.check_files = true;
  const jobspec::JobSpecResult loaded = jobspec::load_job_spec_file(args.spec_path, options);
  if (!loaded.ok()) {
    for (const jobspec::JobSpecError& error : loaded.errors) err << error.to_string() << "\n";
    return 2;
  }
  config::JobSpec spec = *loaded.spec;
  if (args.summary_json &&
      !launch::summary_path_usable(*args.summary_json, "mixtrain train", err)) {
    return 2;  // found now, not after the whole run
  }
  if (!args.resume) {
    const std::filesystem::path dir = config::effective_checkpoint_dir(spec);
    if (const std::optional<CheckpointInfo> held = latest_checkpoint(dir)) {
      err << "mixtrain train: " << dir.string() << " already holds the checkpoints of a run "
          << "(newest: " << held->path.filename().string() << "); continue that run with --resume "
          << dir.string()
          << ", or give this one another checkpoint.dir (--set checkpoint.dir=...)\n";
      return 2;
    }
  }

  const int world_size = args.nproc.value_or(static_cast<int>(spec.resources.workers));
  if (world_size < 1) {
    err << "mixtrain train: --nproc must be at least 1, got " << world_size << "\n";
    return 2;
  }
  RankGroup group;
  try {
    const std::optional<launch::RankEnvironment> env = launch::rank_environment();
    if (!env && world_size > 1) return launch::run_local_ranks(args.argv, world_size, err);
    if (env) group.env = *env;
  } catch (const EngineError& e) {
    err << "mixtrain train: " << e.what() << "\n";
    return 2;
  }
  const bool leader = group.env.rank == 0;
  const std::string who =
      group.env.world_size > 1 ? " (rank " + std::to_string(group.env.rank) + ")" : "";

  std::unique_ptr<Backend> backend;
  try {
    // The ranks of one machine take a GPU each, by their local rank.
    backend = make_backend(config::enum_name(spec.resources.backend), group.env.local_rank);
  } catch (const EngineError& e) {
    err << args.spec_path << ": resources.backend: " << e.what() << "\n";
    return 2;
  }
  if (spec.auto_keys.any()) {
    try {
      const std::optional<config::JobSpec> chosen =
          choose_here(spec, *backend, group.env.world_size, leader, out, err);
      if (!chosen) return 2;
      spec = *chosen;
    } catch (const EngineError& e) {  // too large to plan
      err << "mixtrain train: " << e.what() << "\n";
      return 2;
    }
  }

  launch::ProgressPrinter printer(out, terminal && leader);
  TrainerOptions trainer_options;
  if (leader) trainer_options.progress = printer.callbacks();
  if (args.resume) trainer_options.resume_dir = *args.resume;
  std::unique_ptr<Trainer> trainer;
  try {
    if (group.env.world_size > 1) {
      group.store = std::make_unique<TcpStoreClient>(group.env.store_host, group.env.store_port,
                                                     group.env.timeout);
      CommOptions comm_options;
      comm_options.timeout = group.env.timeout;
      group.comm = make_rank_communicator(*backend, *group.store, group.env.rank,
                                          group.env.world_size, comm_options);
      trainer_options.comm = group.comm.get();
    }
    // A run without a coordinator has epoch 0 and its directory to itself:
    // the temporaries an earlier run killed mid-checkpoint left are stale.
    if (leader) remove_stale_checkpoint_temporaries(config::effective_checkpoint_dir(spec), 1);
    trainer = std::make_unique<Trainer>(*backend, spec, trainer_options);
    if (args.resume) {  // every rank finds the same and stops
      const std::optional<CheckpointInfo> held =
          intact_checkpoint_past(trainer->checkpoint_dir(), trainer->step());
      if (held) {
        if (leader) {
          err << "mixtrain train: " << trainer->checkpoint_dir().string() << " already holds "
              << held->path.filename().string() << ", past step " << trainer->step()
              << " where this run resumes, and the run would have to write it again; resume "
                 "from it (--resume "
              << trainer->checkpoint_dir().string()
              << "), or give this run another checkpoint.dir (--set checkpoint.dir=...)\n";
        }
        return 2;
      }
    }
  } catch (const EngineError& e) {
    err << "mixtrain train" << who << ": " << e.what() << "\n";
    return exit_code(e.code());
  }

  auto [summary, exit_code] = launch::run_trainer(*trainer, printer, "mixtrain train" + who, err);
  if (group.store) exchange_rank_summaries(group, summary, err);
  if (!leader) return exit_code;
  print_outcome(summary, trainer->checkpoint_dir(), out);
  if (args.summary_json &&
      !launch::write_summary_file(*args.summary_json, dump_json(summary.to_json(), 2),
                                  "mixtrain train", err)) {
    exit_code = 1;
  }
  return exit_code;
}

}  // namespace mixtrain::cli
