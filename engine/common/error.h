// Why: the engine must build without abseil (GPU machines have no gRPC or
// abseil), so it reports failures as one exception type carrying a code
// that the service layer maps to absl::Status / gRPC codes at its boundary.
#pragma once

#include <stdexcept>
#include <string>

namespace mixtrain {

enum class ErrorCode {
  kInvalidArgument,  // caller passed something impossible (shape, dtype, value)
  kOutOfMemory,      // an allocation failed
  kUnavailable,      // a device or peer is not there
  kFailedPrecondition,  // training cannot go on (e.g. the loss scale is at min_scale)
  kInternal,         // a library call failed unexpectedly
};

class EngineError : public std::runtime_error {
 public:
  EngineError(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// A process's exit status for an error of `code`: 2 when what it was
// asked was wrong (kInvalidArgument: a bad spec, flag or file), 1 for any
// other failure. Every binary's main and command exits through this.
inline int exit_code(ErrorCode code) { return code == ErrorCode::kInvalidArgument ? 2 : 1; }

}  // namespace mixtrain

// Throws EngineError(kInvalidArgument, message) unless `condition` holds.
// A macro so that `message` (often a concatenation naming the op and the
// tensor) is built only when the check fails, never on the hot path.
#define MIXTRAIN_CHECK_ARG(condition, message)                                           \
  do {                                                                                   \
    if (!(condition)) [[unlikely]]                                                       \
      throw ::mixtrain::EngineError(::mixtrain::ErrorCode::kInvalidArgument, (message)); \
  } while (0)
