// Why: the task process tells its agent how training goes over a pipe
// (fd kReportFd), one JSON object per line, so the agent can update
// Prometheus series and report progress without sharing memory with a
// process that may crash. Lines are written whole by the child and read
// whole by the agent; a malformed line is dropped, never fatal.
//
//   {"type":"step", "step":..,"steps":..,"loss":..,"loss_scale":..,"lr":..,
//    "grad_norm":..,"tokens_per_second":..,"skipped":bool,
//    "nonfinite_kind":"nan|inf|","nonfinite_where":"loss|grads|",
//    "seconds":..,"tokens":..,"rank_tokens":..,"model_flops":..,
//    "memory":{"device":{<category>:bytes,...,"peak":bytes},"host":{...}},
//    "comm":{"all_reduce":{"bytes":..,"seconds":..},...}}   (comm: cumulative)
//   {"type":"eval","step":..,"val_loss":..}
//   {"type":"summary","summary":{...DESIGN.md §5, ranks = this rank only}}
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
};

struct ChildMessage {
  enum class Kind { kStep, kEval, kSummary };
  Kind kind = Kind::kStep;
  StepReport step;           // kStep
  EvalProgress eval;         // kEval
  std::string summary_json;  // kSummary: the summary object as compact JSON
};

// One line each (no trailing newline). Never throw: a non-finite loss
// (a diverged run) is written as null, in the summary too.
std::string encode_step(const StepReport& step);
std::string encode_eval(const EvalProgress& eval);
std::string encode_summary(const TrainSummary& summary);

// The message `line` holds; nullopt when it is not one these wrote.
std::optional<ChildMessage> decode_child_message(std::string_view line);

}  // namespace mixtrain::worker
