// Why: `mixtrain train` and the worker agent's task process end a rank's
// run the same way: train to the end, and when training throws, say why
// and still produce the summary of what was done (status "failed"), since
// DESIGN.md §5 asks for a summary of failed runs too.
#pragma once

#include <ostream>
#include <string>

#include "launch/progress_printer.h"
#include "engine/train/trainer.h"

namespace mixtrain::launch {

struct RunOutcome {
  TrainSummary summary;
  int exit_code = 0;  // 0: succeeded, 1: training failed
};

// Runs `trainer` to the end and finishes `printer`'s output. When training
// throws, writes "<who>: <what>" to `err` and returns the summary so far
// with status "failed" and exit code 1. Never throws.
RunOutcome run_trainer(Trainer& trainer, ProgressPrinter& printer, const std::string& who,
                       std::ostream& err);

}  // namespace mixtrain::launch
