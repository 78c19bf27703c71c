// Why: see run_trainer.h.
#include "launch/run_trainer.h"

namespace mixtrain::launch {

RunOutcome run_trainer(Trainer& trainer, ProgressPrinter& printer, const std::string& who,
                       std::ostream& err) {
  RunOutcome out;
  try {
    out.summary = trainer.run();
  } catch (const std::exception& e) {
    printer.finish();
    err << who << ": " << e.what() << "\n";
    out.summary = trainer.summary("failed");
    out.exit_code = 1;
  }
  printer.finish();
  return out;
}

}  // namespace mixtrain::launch
