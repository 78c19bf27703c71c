// Why: the CUDA-only argument check: sizes handed to kernels and cuBLAS
// must fit an int. The checks shared with the CPU are in op_checks.h.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "engine/backend/tensor.h"

namespace mixtrain::gpu {

// `value` as an int (cuBLAS dimensions, kernel row counts); throws
// EngineError(kInvalidArgument) naming `op` and `what` when it does not fit.
inline int checked_int(const char* op, const char* what, int64_t value) {
  MIXTRAIN_CHECK_ARG(value >= 0 && value <= std::numeric_limits<int>::max(),
            std::string(op) + ": " + what + " = " + std::to_string(value) +
                " is out of range for this GPU kernel");
  return static_cast<int>(value);
}

}  // namespace mixtrain::gpu
