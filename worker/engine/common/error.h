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

// Throws EngineError(kInvalidArgument, message) unless `condition` holds.
inline void check_arg(bool condition, const std::string& message) {
  if (!condition) throw EngineError(ErrorCode::kInvalidArgument, message);
}

}  // namespace mixtrain
