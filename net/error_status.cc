// Why: see error_status.h.
#include "net/error_status.h"

#include <string>

namespace mixtrain::net {
namespace {

struct CodePair {
  ErrorCode engine;
  absl::StatusCode status;
};

constexpr CodePair kCodes[] = {
    {ErrorCode::kInvalidArgument, absl::StatusCode::kInvalidArgument},
    {ErrorCode::kOutOfMemory, absl::StatusCode::kResourceExhausted},
    {ErrorCode::kUnavailable, absl::StatusCode::kUnavailable},
    {ErrorCode::kFailedPrecondition, absl::StatusCode::kFailedPrecondition},
    {ErrorCode::kInternal, absl::StatusCode::kInternal},
};

}  // namespace

absl::Status to_status(const EngineError& error, std::string_view context) {
  absl::StatusCode code = absl::StatusCode::kInternal;
  for (const CodePair& pair : kCodes) {
    if (pair.engine == error.code()) code = pair.status;
  }
  return absl::Status(code, std::string(context) + error.what());
}

ErrorCode error_code(absl::StatusCode code) {
  for (const CodePair& pair : kCodes) {
    if (pair.status == code) return pair.engine;
  }
  return ErrorCode::kInternal;
}

}  // namespace mixtrain::net
