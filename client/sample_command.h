// Why: `mixtrain sample CKPT` (DESIGN.md §3) shows what a trained model has
// learned: it continues a prompt with text sampled from the checkpoint.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace mixtrain::cli {

struct SampleCommandArgs {
  std::string checkpoint;  // a checkpoint directory or a run's checkpoint directory
  std::string prompt;      // bytes, for byte-level (vocab 256) models
  int64_t tokens = 256;
  float temperature = 1.0f;
  int64_t top_k = 0;
  uint64_t seed = 1337;
};

// Prints the prompt and its continuation to `out` (as text for byte-level
// models, as token ids otherwise). Returns 0, or 2 with the problem on
// `err` for a missing or corrupt checkpoint or a bad option.
int run_sample_command(const SampleCommandArgs& args, std::ostream& out, std::ostream& err);

}  // namespace mixtrain::cli
