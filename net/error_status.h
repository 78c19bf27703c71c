// Why: the engine reports failures as EngineError (it builds without
// abseil), the service as absl::Status; where the two meet, one mapping
// of their codes turns one into the other, and one exit status ends a
// process on either (exit_code in engine/common/error.h).
#pragma once

#include <string_view>

#include <absl/status/status.h>

#include "engine/common/error.h"

namespace mixtrain::net {

// `error` as a status of the matching code, its message after `context`.
absl::Status to_status(const EngineError& error, std::string_view context = "");

// The engine's code for a status code (kInternal for those it has none of).
ErrorCode error_code(absl::StatusCode code);

// The exit status of a process that ends on `status` (not OK).
inline int exit_code(const absl::Status& status) {
  return mixtrain::exit_code(error_code(status.code()));
}

}  // namespace mixtrain::net
