// Why: see task_child.h.
#include "worker/task_child.h"

#include <omp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/checkpoint/checkpoint_fence.h"
#include "engine/checkpoint/checkpoint_store.h"
#include "engine/comm/make_communicator.h"
#include "engine/common/json.h"
#include "engine/config/job_spec_json.h"
#include "engine/train/trainer.h"
#include "launch/local_ranks.h"
#include "launch/progress_printer.h"
#include "launch/run_trainer.h"
#include "worker/child_messages.h"
#include "worker/grpc_store.h"
#include "worker/signal_watcher.h"
#include "worker/task_launch.h"

namespace mixtrain::worker {
namespace {

// Set once kPreemptSignal arrives, read by the trainer between steps.
std::atomic<bool> g_stop_requested{false};

// Writes one report frame to the report pipe (whole, retrying short
// writes); a closed or absent pipe is ignored, training goes on.
void report(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(kReportFd, text.data() + done, text.size() - done);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;
    }
    done += static_cast<size_t>(n);
  }
}

// Model FLOPs of training one token: 6 per parameter (forward and
// backward) plus attention's 12·layers·seq_len·dim (PaLM, appendix B).
double model_flops_per_token(const config::ModelSpec& model, int64_t param_count) {
  return 6.0 * static_cast<double>(param_count) +
         12.0 * static_cast<double>(model.layers * model.seq_len * model.dim);
}

// The backend to train with: the agent's device ("cpu" or "cuda:N") unless
// the spec asks for the CPU, so every rank uses the GPU its worker holds.
std::string backend_name(const config::JobSpec& spec, const std::string& agent_backend) {
  switch (spec.resources.backend) {
    case config::BackendChoice::kCpu: return "cpu";
    case config::BackendChoice::kCuda: return agent_backend.starts_with("cuda") ? agent_backend : "cuda";
    case config::BackendChoice::kAuto: break;
  }
  return agent_backend;
}

// The task's spec, validated again (a coordinator of another version may
// have let something through) with its files checked here, beneath the
// data root this process now runs in; nullopt after saying what is wrong.
std::optional<config::JobSpec> read_task_spec(const v1::Task& task) {
  const std::string source = task.job_id() + " spec";
  config::JobSpec spec;
  try {
    spec = config::job_spec_from_json(parse_json(task.spec_json()));
  } catch (const EngineError& e) {
    std::cerr << source << ": " << e.what() << "\n";
    return std::nullopt;
  }
  std::vector<config::SpecError> errors = config::validate(spec);
  if (errors.empty()) errors = config::check_files(spec);
  for (const config::SpecError& e : errors)
    std::cerr << source << ": " << e.key_path << ": " << e.message << "\n";
  if (!errors.empty()) return std::nullopt;
  return spec;
}

}  // namespace

int run_task_child(std::istream& in) {
  // Ends with the agent's runner thread, so no rank trains on unsupervised.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The preemption signal, held blocked since the start, stays blocked in
  // every thread: it is taken by a thread of its own, never handled where
  // a GEMM may run (signal_watcher.h).
  watch_signal(kPreemptSignal, &g_stop_requested);
  ::signal(SIGPIPE, SIG_IGN);
  std::cout << std::unitbuf;  // the agent forwards lines as they come
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string error;
  const std::optional<TaskLaunch> launch = decode_task_launch(text, error);
  if (!launch) {
    std::cerr << "mixtrain-worker task: " << error << "\n";
    return 2;
  }
  const v1::Task& task = launch->task;
  omp_set_num_threads(launch->threads);
  // NCCL's bootstrap and socket transport pick an interface of their own
  // unless told; the one holding our data address is the one peers reach.
  if (!launch->data_iface.empty()) ::setenv("NCCL_SOCKET_IFNAME", launch->data_iface.c_str(), 0);
  if (!task.data_root().empty() && ::chdir(task.data_root().c_str()) != 0) {
    std::cerr << "cannot enter the data root " << task.data_root() << ": " << std::strerror(errno)
              << "\n";
    return 2;
  }
  const std::optional<config::JobSpec> resolved = read_task_spec(task);
  if (!resolved) return 2;
  const config::JobSpec& spec = *resolved;

  launch::ProgressPrinter printer(std::cout, /*terminal=*/false);
  std::unique_ptr<Backend> backend;
  std::unique_ptr<WorkerConnection> connection;
  std::unique_ptr<GrpcStore> store;
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<Trainer> trainer;
  try {
    backend = make_backend(backend_name(spec, launch->backend));
    // The memory this worker registered: past it the rank fails as out of
    // memory, naming the category, rather than being killed by the kernel.
    backend->memory().set_ram_limit(static_cast<size_t>(launch->memory_limit),
                                    backend->device_type() == DeviceType::kCpu);
    TrainerOptions options;
    // Checked again as each file opens: a path may have become a symlink
    // out of the root since the coordinator checked it at submit.
    if (!task.data_root().empty()) options.data_root = task.data_root();
    if (task.world_size() > 1) {
      absl::StatusOr<std::unique_ptr<WorkerConnection>> opened =
          WorkerConnection::open(launch->connection);
      if (!opened.ok()) throw EngineError(ErrorCode::kInvalidArgument, opened.status().ToString());
      connection = std::move(*opened);
      const std::chrono::milliseconds timeout = launch::collective_timeout();
      store = std::make_unique<GrpcStore>(*connection, task.rendezvous_scope(), timeout);
      CommOptions comm_options;
      comm_options.timeout = timeout;
      if (!launch->data_address.empty()) comm_options.hostname = launch->data_address;
      comm = make_rank_communicator(*backend, *store, task.rank(), task.world_size(), comm_options);
      options.comm = comm.get();
    }
    if (!task.checkpoint_dir().empty()) {
      options.checkpoint_dir = task.checkpoint_dir();
      // Claimed before looking for a checkpoint: from now on a rank of an
      // earlier attempt that still runs can no longer commit or prune there.
      options.checkpoint_epoch = task.attempt();
      if (task.attempt() >= 1) claim_checkpoint_epoch(task.checkpoint_dir(), task.attempt());
      // The whole run directory, not its latest checkpoint: the trainer
      // resumes from the newest one that verifies, passing over damaged ones.
      if (task.resume() && latest_checkpoint(task.checkpoint_dir())) {
        options.resume_dir = task.checkpoint_dir();
      }
    }
    options.progress = printer.callbacks();
    options.stop_requested = &g_stop_requested;
    // Called for every step long after this block ended: it holds only
    // what outlives the block (this function's own locals, by reference).
    options.progress.on_step = [&spec, &trainer, &backend, &comm,
                                world = static_cast<double>(task.world_size()),
                                print = options.progress.on_step](const StepProgress& step) {
      print(step);
      StepReport out;
      out.progress = step;
      out.rank_tokens = step.tokens / world;
      out.model_flops =
          model_flops_per_token(spec.model, trainer->layout().param_count()) * out.rank_tokens;
      out.memory = memory_report(backend->memory());
      if (comm) out.comm = comm->stats();
      out.gemm_fallbacks = backend->gemm_fallbacks();
      report(encode_step(out));
    };
    options.progress.on_eval = [print = options.progress.on_eval](const EvalProgress& eval) {
      print(eval);
      report(encode_eval(eval));
    };
    // An evaluation says how far it is with its first batch and then about
    // once a second: the coordinator's stall watchdog counts that as
    // progress, and a long one costs a frame a second, not one a batch.
    options.progress.on_eval_batch = [last = std::chrono::steady_clock::time_point()](
                                         const EvalBatchProgress& eval_batch) mutable {
      const auto now = std::chrono::steady_clock::now();
      if (eval_batch.done > 1 && now - last < std::chrono::seconds(1)) return;
      last = now;
      report(encode_eval_batch(eval_batch));
    };
    trainer = std::make_unique<Trainer>(*backend, spec, options);
  } catch (const EngineError& e) {  // a spec this backend or data cannot run is the job's fault
    std::cerr << "cannot start training: " << e.what() << "\n";
    return exit_code(e.code());
  } catch (const std::exception& e) {
    std::cerr << "cannot start training: " << e.what() << "\n";
    return 1;
  }

  const launch::RunOutcome outcome =
      launch::run_trainer(*trainer, printer, "training failed", std::cerr);
  report(encode_summary(outcome.summary));
  return outcome.summary.status == "preempted" ? kPreemptedExitCode : outcome.exit_code;
}

}  // namespace mixtrain::worker
