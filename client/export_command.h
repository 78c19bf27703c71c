// Why: `mixtrain export CKPT --format safetensors -O FILE` hands a trained
// model to the outside world: a Hugging Face GPT2LMHeadModel safetensors
// file that transformers (and model.init_from) can load.
#pragma once

#include <ostream>
#include <string>

namespace mixtrain::cli {

struct ExportCommandArgs {
  std::string checkpoint;             // a checkpoint directory or a run's checkpoint directory
  std::string format = "safetensors"; // the only format there is
  std::string output;                 // the file to create (must not exist)
  std::string dtype = "fp32";         // fp32, fp16 or bf16
};

// Writes the checkpoint's master weights to args.output and returns 0, or
// returns 2 with the problem on `err` for a missing or corrupt checkpoint,
// an unknown format or dtype, or an output file that exists; 1 for any
// other failure (an I/O error).
int run_export_command(const ExportCommandArgs& args, std::ostream& err);

}  // namespace mixtrain::cli
