// Why: GptConfig's validation, with messages that name the field a job spec
// got wrong.
#include "engine/model/gpt_config.h"

#include <string>

#include "engine/common/error.h"

namespace mixtrain {
namespace {

void check_positive(const char* field, int64_t value) {
  MIXTRAIN_CHECK_ARG(value > 0, std::string("GptConfig: ") + field + " must be positive, got " +
                                    std::to_string(value));
}

}  // namespace

void GptConfig::validate() const {
  check_positive("layers", layers);
  check_positive("heads", heads);
  check_positive("dim", dim);
  check_positive("seq_len", seq_len);
  check_positive("vocab", vocab);
  MIXTRAIN_CHECK_ARG(dim % heads == 0, "GptConfig: heads " + std::to_string(heads) +
                                           " must divide dim " + std::to_string(dim));
}

}  // namespace mixtrain
