// Why: the planner multiplies user-given sizes (layers x dim x seq_len x
// batch ...), and a spec the validator accepts may still describe more
// bytes than an int64 holds; every product and sum the planner takes goes
// through these, which say "too large" instead of wrapping around.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace mixtrain::plan {

// The product of `factors` (each >= 0); throws EngineError(kInvalidArgument)
// "<what>: too large to plan (over 2^63 bytes)" naming `what` on overflow.
int64_t checked_product(std::initializer_list<int64_t> factors, const char* what);
// The sum of `terms` (each >= 0), likewise.
int64_t checked_sum(std::initializer_list<int64_t> terms, const char* what);

}  // namespace mixtrain::plan
