// Why: implementation of `mixtrain export` (see export_command.h). It
// streams: each HF tensor is gathered from the checkpoint's shards and
// written before the next, so only one parameter is ever copied, however
// large the model and its optimizer state.
#include "client/export_command.h"

#include <filesystem>

#include "engine/common/error.h"
#include "engine/model/hf_safetensors.h"
#include "engine/numerics/dtype.h"
#include "engine/train/trainer_checkpoint_files.h"

namespace mixtrain::cli {

int run_export_command(const ExportCommandArgs& args, std::ostream& err) {
  try {
    MIXTRAIN_CHECK_ARG(args.format == "safetensors",
                       "--format " + args.format + ": the only export format is safetensors");
    const DType dtype = parse_dtype(args.dtype);
    MIXTRAIN_CHECK_ARG(is_float_compute(dtype),
                       "--dtype " + args.dtype + ": must be one of fp32, fp16, bf16");
    MIXTRAIN_CHECK_ARG(!std::filesystem::exists(args.output),
                       "-O " + args.output + ": the file exists; export will not overwrite it");
    // Parameter by parameter, gathered from the shards' master weights.
    const TrainerCheckpoint checkpoint = open_trainer_checkpoint(args.checkpoint);
    const auto parameter = [&checkpoint](const ParameterInfo& info) {
      const FlatRun run{info.offset, info.numel};
      return checkpoint.shards.read(kMasterTensorName, {&run, 1});
    };
    export_hf_safetensors(args.output, checkpoint.state.model, parameter, dtype);
    return 0;
  } catch (const EngineError& e) {
    err << "mixtrain export: " << e.what() << "\n";
    return exit_code(e.code());
  }
}

}  // namespace mixtrain::cli
