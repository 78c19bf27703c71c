// Why: a GPU machine has no gRPC, so no `mixtrain train`; this drives the
// engine's Trainer directly (engine-only build) to measure training
// throughput on any backend, and to check a backend's first steps against
// the CPU backend's. Used by bench/gpu_train_bench.py and
// scripts/gpu-check.sh; it runs on the CPU backend too (the tests do).
//
//   engine_train_bench [--backend cuda] [--precision bf16] [--layers 6]
//       [--heads 6] [--dim 384] [--seq-len 256] [--vocab 256]
//       [--micro-batch 8] [--steps 20] [--warmup 3] [--stage 0]
//       [--offload] [--compare-backend cpu] [--peak-tflops X]
//
// Throughput: one line "engine_train_bench backend=... params=N
// tokens_per_second=X model_tflops=Y [mfu=Z]" over the steps after the
// warm-up (the progress's per-step wall time; no evaluation, and the final
// checkpoint, into a temporary directory, is not timed). Model FLOPs per
// token are 6 * params + 12 * layers * dim * seq_len (PaLM's appendix B,
// attention included); MFU divides by --peak-tflops.
// With --compare-backend B, the same steps run on B as well, and one line
// per step gives both losses; the exit status is 1 when a loss differs by
// more than --tolerance (relative), 0 otherwise.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/common/error.h"
#include "engine/config/job_spec.h"
#include "engine/numerics/dtype.h"
#include "engine/train/trainer.h"

namespace mixtrain {
namespace {

struct Options {
  std::string backend = "cuda";
  std::string precision = "bf16";
  int64_t layers = 6, heads = 6, dim = 384, seq_len = 256, vocab = 256;
  int64_t micro_batch = 8, steps = 20, warmup = 3, stage = 0;
  bool offload = false;
  std::string compare_backend;
  double tolerance = 2e-2;
  double peak_tflops = 0.0;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "engine_train_bench: " << problem
            << "\nusage: engine_train_bench [--backend NAME] [--precision fp32|bf16|fp16]"
               " [--layers N] [--heads N] [--dim N] [--seq-len N] [--vocab N]"
               " [--micro-batch N] [--steps N] [--warmup N] [--stage 0-3] [--offload]"
               " [--compare-backend NAME] [--tolerance X] [--peak-tflops X]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  std::map<std::string, int64_t*> integers = {
      {"--layers", &o.layers},           {"--heads", &o.heads},  {"--dim", &o.dim},
      {"--seq-len", &o.seq_len},         {"--vocab", &o.vocab},  {"--steps", &o.steps},
      {"--micro-batch", &o.micro_batch}, {"--warmup", &o.warmup}, {"--stage", &o.stage}};
  std::map<std::string, std::string*> strings = {{"--backend", &o.backend},
                                                 {"--precision", &o.precision},
                                                 {"--compare-backend", &o.compare_backend}};
  std::map<std::string, double*> reals = {{"--tolerance", &o.tolerance},
                                          {"--peak-tflops", &o.peak_tflops}};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--offload") {
      o.offload = true;
      continue;
    }
    if (i + 1 >= argc) usage(flag + " needs a value");
    const std::string value = argv[++i];
    char* end = nullptr;
    if (auto it = integers.find(flag); it != integers.end()) {
      *it->second = std::strtoll(value.c_str(), &end, 10);
    } else if (auto real = reals.find(flag); real != reals.end()) {
      *real->second = std::strtod(value.c_str(), &end);
    } else if (auto text = strings.find(flag); text != strings.end()) {
      *text->second = value;
      continue;
    } else {
      usage("unknown flag " + flag);
    }
    if (end == value.c_str() || *end != '\0') usage(flag + " takes a number, got " + value);
  }
  if (o.warmup >= o.steps) usage("--warmup must be below --steps");
  return o;
}

config::JobSpec make_spec(const Options& o, const std::filesystem::path& checkpoints) {
  config::JobSpec spec;
  spec.name = "engine-train-bench";
  spec.model.layers = o.layers;
  spec.model.heads = o.heads;
  spec.model.dim = o.dim;
  spec.model.seq_len = o.seq_len;
  spec.model.vocab = o.vocab;
  spec.data.train = std::string(config::kBuiltinDemoData);
  spec.train.steps = o.steps;
  spec.train.micro_batch = o.micro_batch;
  spec.train.warmup_steps = 0;
  spec.train.eval_batches = 0;  // throughput only
  spec.precision.compute = parse_dtype(o.precision);
  spec.zero.stage = o.stage;
  if (o.offload) {
    spec.zero.offload_optimizer = config::OffloadTarget::kCpu;
    if (o.stage == 3) spec.zero.offload_params = config::OffloadTarget::kCpu;
  }
  spec.checkpoint.every = o.steps;
  spec.checkpoint.keep = 1;
  spec.checkpoint.dir = checkpoints.string();
  return spec;
}

struct Run {
  std::string backend;
  int64_t params = 0;
  std::vector<double> losses;
  double timed_tokens = 0.0, timed_seconds = 0.0;
};

Run train(const Options& o, const std::string& backend_name) {
  const std::filesystem::path checkpoints =
      std::filesystem::temp_directory_path() /
      ("engine_train_bench_" + std::to_string(::getpid()) + "_" + backend_name);
  std::filesystem::remove_all(checkpoints);
  Run run;
  const std::unique_ptr<Backend> backend = make_backend(backend_name);
  run.backend = backend->name();
  TrainerOptions options;
  options.progress.on_step = [&](const StepProgress& step) {
    run.losses.push_back(step.loss);
    if (step.step > o.warmup) {
      run.timed_tokens += step.tokens;
      run.timed_seconds += step.seconds;
    }
    std::fprintf(stderr, "[%s] step %lld/%lld  loss %.4f  %.0f tok/s\n", run.backend.c_str(),
                 static_cast<long long>(step.step), static_cast<long long>(step.steps), step.loss,
                 step.tokens_per_second);
  };
  {
    Trainer trainer(*backend, make_spec(o, checkpoints), std::move(options));
    run.params = trainer.layout().param_count();
    trainer.run();
  }
  std::filesystem::remove_all(checkpoints);
  return run;
}

int main_checked(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const Run run = train(o, o.backend);
  const double tokens_per_second = run.timed_tokens / run.timed_seconds;
  const double flops_per_token =
      6.0 * static_cast<double>(run.params) +
      12.0 * static_cast<double>(o.layers * o.dim * o.seq_len);
  const double model_tflops = flops_per_token * tokens_per_second / 1e12;
  std::printf("engine_train_bench backend=%s precision=%s stage=%lld offload=%d params=%lld "
              "micro_batch=%lld seq_len=%lld tokens_per_second=%.1f model_tflops=%.2f",
              run.backend.c_str(), o.precision.c_str(), static_cast<long long>(o.stage),
              o.offload ? 1 : 0, static_cast<long long>(run.params),
              static_cast<long long>(o.micro_batch), static_cast<long long>(o.seq_len),
              tokens_per_second, model_tflops);
  if (o.peak_tflops > 0) std::printf(" mfu=%.4f", model_tflops / o.peak_tflops);
  std::printf("\n");
  if (o.compare_backend.empty()) return 0;

  const Run other = train(o, o.compare_backend);
  int status = 0;
  for (size_t i = 0; i < run.losses.size() && i < other.losses.size(); ++i) {
    const double relative =
        std::fabs(run.losses[i] - other.losses[i]) / std::max(1e-12, std::fabs(other.losses[i]));
    const bool ok = relative <= o.tolerance;
    if (!ok) status = 1;
    std::printf("compare step=%zu %s=%.6f %s=%.6f relative=%.2e %s\n", i + 1,
                run.backend.c_str(), run.losses[i], other.backend.c_str(), other.losses[i],
                relative, ok ? "ok" : "DIFFERS");
  }
  return status;
}

}  // namespace
}  // namespace mixtrain

int main(int argc, char** argv) {
  try {
    return mixtrain::main_checked(argc, argv);
  } catch (const mixtrain::EngineError& e) {
    std::cerr << "engine_train_bench: " << e.what() << "\n";
    return 1;
  }
}
