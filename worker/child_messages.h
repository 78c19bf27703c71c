// Why: the task process tells its agent how training goes over a pipe
// (fd kReportFd), so the agent can update Prometheus series and report
// progress without sharing memory with a process that may crash. Each
// report is a task::ChildReport (proto/task_process.proto) in one frame
// (frame_pipe.h); these turn the engine's structs into reports and back.
// A report that does not parse, or a summary that is not one, is dropped,
// never fatal.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "engine/comm/comm_stats.h"
#include "engine/train/progress.h"
#include "engine/train/train_summary.h"

namespace mixtrain::worker {

// The file descriptor of the report pipe in the task process.
inline constexpr int kReportFd = 3;

// One step with what the metrics need beyond StepProgress.
struct StepReport {
  StepProgress progress;
  double rank_tokens = 0.0;  // this rank's share of progress.tokens
  double model_flops = 0.0;  // model FLOPs this rank computed in the step
  MemoryReport memory;       // this rank's memory after the step
  CommStats comm;            // this rank's collectives since the task began
  int64_t gemm_fallbacks = 0;  // Backend::gemm_fallbacks since the task began
};

struct ChildMessage {
  enum class Kind { kStep, kEval, kEvalBatch, kSummary };
  Kind kind = Kind::kStep;
  StepReport step;               // kStep
  EvalProgress eval;             // kEval
  EvalBatchProgress eval_batch;  // kEvalBatch
  TrainSummary summary;          // kSummary
};

// One frame each, ready for the pipe. Never throw: losses travel as they
// are, NaN included.
std::string encode_step(const StepReport& step);
std::string encode_eval(const EvalProgress& eval);
std::string encode_eval_batch(const EvalBatchProgress& eval_batch);
std::string encode_summary(const TrainSummary& summary);

// The message one frame's bytes hold; nullopt when they hold none of these.
std::optional<ChildMessage> decode_child_message(std::string_view frame);

}  // namespace mixtrain::worker
