// Why: bad input must fail with EngineError(kInvalidArgument) and a message
// naming what was wrong; every area's tests check both the same way.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "engine/common/error.h"

namespace mixtrain::test_support {

// Runs f, which must throw EngineError(kInvalidArgument) whose message
// contains every fragment (the op, the key, the file, the bad value...).
template <class F>
::testing::AssertionResult throws_invalid_argument(F&& f,
                                                   std::initializer_list<std::string> fragments) {
  try {
    f();
  } catch (const EngineError& e) {
    if (e.code() != ErrorCode::kInvalidArgument) {
      return ::testing::AssertionFailure() << "wrong error code for: " << e.what();
    }
    for (const std::string& fragment : fragments) {
      if (std::string(e.what()).find(fragment) == std::string::npos) {
        return ::testing::AssertionFailure()
               << "message \"" << e.what() << "\" lacks \"" << fragment << "\"";
      }
    }
    return ::testing::AssertionSuccess() << e.what();
  }
  return ::testing::AssertionFailure() << "no EngineError thrown";
}

}  // namespace mixtrain::test_support
