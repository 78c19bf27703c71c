// Why: formatting of the training progress lines (see progress_printer.h).
#include "launch/progress_printer.h"

#include <cstdio>
#include <string>

namespace mixtrain::launch {
namespace {

// "1h02m", "3m07s", "42s".
std::string format_duration(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  char text[32];
  if (s >= 3600) {
    std::snprintf(text, sizeof(text), "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  } else if (s >= 60) {
    std::snprintf(text, sizeof(text), "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(text, sizeof(text), "%lds", s);
  }
  return text;
}

}  // namespace

ProgressPrinter::ProgressPrinter(std::ostream& out, bool terminal)
    : out_(out), terminal_(terminal), start_(std::chrono::steady_clock::now()) {}

TrainerProgress ProgressPrinter::callbacks() {
  TrainerProgress progress;
  progress.on_step = [this](const StepProgress& step) { print_step(step); };
  progress.on_eval = [this](const EvalProgress& eval) { print_eval(eval); };
  progress.on_log = [this](const std::string& line) { print_line(line); };
  return progress;
}

void ProgressPrinter::print_step(const StepProgress& step) {
  if (first_step_ < 0) {
    first_step_ = step.step;
    start_ = std::chrono::steady_clock::now();
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const int64_t done = step.step - first_step_ + 1;
  const double eta = done > 0 ? elapsed / static_cast<double>(done) *
                                    static_cast<double>(step.steps - step.step)
                              : 0.0;
  char text[200];
  std::snprintf(text, sizeof(text),
                "step %lld/%lld  loss %.4f  scale %g  lr %.2e  norm %.3f  %.0f tok/s  eta %s%s",
                static_cast<long long>(step.step), static_cast<long long>(step.steps), step.loss,
                step.loss_scale, step.lr, step.grad_norm, step.tokens_per_second,
                format_duration(eta).c_str(), step.skipped ? "  (skipped)" : "");
  if (terminal_) {
    out_ << "\r\033[K" << text << std::flush;
    line_open_ = true;
  } else {
    out_ << text << "\n" << std::flush;  // a log followed live, or cut short by a kill
  }
}

void ProgressPrinter::print_eval(const EvalProgress& eval) {
  char text[100];
  std::snprintf(text, sizeof(text), "eval  step %lld  val loss %.4f",
                static_cast<long long>(eval.step), eval.val_loss);
  print_line(text);
}

void ProgressPrinter::print_line(const std::string& line) {
  finish();
  out_ << line << "\n" << std::flush;
}

void ProgressPrinter::finish() {
  if (!line_open_) return;
  out_ << "\n";
  line_open_ = false;
}

}  // namespace mixtrain::launch
