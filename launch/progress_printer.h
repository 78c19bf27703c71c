// Why: `mixtrain train` shows how a run is going the way users of llm.c and
// DeepSpeed expect: step, loss, loss scale, tokens/s and ETA, rewritten in
// place on a terminal and one plain line per step otherwise (logs, CI).
#pragma once

#include <chrono>
#include <ostream>

#include "engine/train/progress.h"

namespace mixtrain::launch {

class ProgressPrinter {
 public:
  // Writes to `out`; `terminal` selects the in-place single-line form.
  ProgressPrinter(std::ostream& out, bool terminal);

  // The callbacks to hand to the trainer (they print through this object,
  // which must outlive the run).
  TrainerProgress callbacks();

  // Ends the in-place line so that what follows starts on a new line.
  void finish();

 private:
  void print_step(const StepProgress& step);
  void print_eval(const EvalProgress& eval);
  void print_line(const std::string& line);

  std::ostream& out_;
  bool terminal_;
  bool line_open_ = false;  // a terminal status line is showing without its newline
  int64_t first_step_ = -1;  // the first step this process ran (resumed runs start later)
  std::chrono::steady_clock::time_point start_;
};

}  // namespace mixtrain::launch
