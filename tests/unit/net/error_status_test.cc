// Why: EngineError and absl::Status meet at every service boundary through
// one mapping (net/error_status.h), and every process exits through one
// exit status: each engine code is pinned to its status code and back.
#include "net/error_status.h"

#include <gtest/gtest.h>

namespace mixtrain::net {
namespace {

TEST(ErrorStatus, EachEngineCodeHasItsStatusCodeAndBack) {
  const std::pair<ErrorCode, absl::StatusCode> pairs[] = {
      {ErrorCode::kInvalidArgument, absl::StatusCode::kInvalidArgument},
      {ErrorCode::kOutOfMemory, absl::StatusCode::kResourceExhausted},
      {ErrorCode::kUnavailable, absl::StatusCode::kUnavailable},
      {ErrorCode::kFailedPrecondition, absl::StatusCode::kFailedPrecondition},
      {ErrorCode::kInternal, absl::StatusCode::kInternal},
  };
  for (const auto& [engine, status] : pairs) {
    const absl::Status converted = to_status(EngineError(engine, "what"), "where: ");
    EXPECT_EQ(converted.code(), status);
    EXPECT_EQ(converted.message(), "where: what");
    EXPECT_EQ(error_code(status), engine);
  }
  EXPECT_EQ(error_code(absl::StatusCode::kDeadlineExceeded), ErrorCode::kInternal);
}

TEST(ErrorStatus, ABadRequestExitsTwoAnythingElseOne) {
  EXPECT_EQ(exit_code(ErrorCode::kInvalidArgument), 2);
  EXPECT_EQ(exit_code(absl::InvalidArgumentError("x")), 2);
  for (ErrorCode code : {ErrorCode::kOutOfMemory, ErrorCode::kUnavailable,
                         ErrorCode::kFailedPrecondition, ErrorCode::kInternal}) {
    EXPECT_EQ(exit_code(code), 1);
    EXPECT_EQ(exit_code(to_status(EngineError(code, "x"))), 1);
  }
  EXPECT_EQ(exit_code(absl::PermissionDeniedError("x")), 1);
}

}  // namespace
}  // namespace mixtrain::net
