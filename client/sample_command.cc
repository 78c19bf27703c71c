// Why: implementation of `mixtrain sample` (see sample_command.h).
#include "client/sample_command.h"

#include "engine/backend/backend.h"
#include "engine/model/model.h"
#include "engine/model/text_generation.h"
#include "engine/train/trainer_checkpoint_files.h"

namespace mixtrain::cli {

int run_sample_command(const SampleCommandArgs& args, std::ostream& out, std::ostream& err) {
  try {
    const CheckpointWeights weights = load_checkpoint_weights(args.checkpoint);
    const GptConfig& config = weights.state.model;
    const bool byte_level = config.vocab <= 256;
    MIXTRAIN_CHECK_ARG(byte_level || args.prompt.empty(),
                       "--prompt needs a byte-level model (vocab <= 256); this one has vocab " +
                           std::to_string(config.vocab));
    std::unique_ptr<Backend> backend = make_backend("auto");
    const std::unique_ptr<Model> model = make_model(*backend, config, DType::kF32, DType::kF32);
    const Tensor params =
        backend->empty({model->layout().numel()}, DType::kF32, MemoryCategory::kParams);
    backend->copy_from_host(params, weights.master.data());

    std::vector<int32_t> prompt;
    for (unsigned char c : args.prompt) prompt.push_back(c);
    GenerationOptions options;
    options.new_tokens = args.tokens;
    options.temperature = args.temperature;
    options.top_k = args.top_k;
    options.seed = args.seed;
    const std::vector<int32_t> ids = generate(*backend, *model, params, prompt, options);

    const size_t skip = prompt.empty() ? 1 : 0;  // generate() starts an empty prompt with id 0
    for (size_t i = skip; i < ids.size(); ++i) {
      if (byte_level) {
        out << static_cast<char>(ids[i]);
      } else {
        out << (i > skip ? " " : "") << ids[i];
      }
    }
    out << "\n";
    return 0;
  } catch (const EngineError& e) {
    err << "mixtrain sample: " << e.what() << "\n";
    return exit_code(e.code());
  }
}

}  // namespace mixtrain::cli
