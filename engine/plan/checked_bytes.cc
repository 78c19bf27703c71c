// Why: see checked_bytes.h.
#include "engine/plan/checked_bytes.h"

#include <string>

#include "engine/common/error.h"

namespace mixtrain::plan {
namespace {

[[noreturn]] void too_large(const char* what) {
  throw EngineError(ErrorCode::kInvalidArgument,
                    std::string(what) + ": too large to plan (over 2^63 bytes)");
}

}  // namespace

int64_t checked_product(std::initializer_list<int64_t> factors, const char* what) {
  int64_t product = 1;
  for (int64_t factor : factors) {
    if (__builtin_mul_overflow(product, factor, &product)) too_large(what);
  }
  return product;
}

int64_t checked_sum(std::initializer_list<int64_t> terms, const char* what) {
  int64_t sum = 0;
  for (int64_t term : terms) {
    if (__builtin_add_overflow(sum, term, &sum)) too_large(what);
  }
  return sum;
}

}  // namespace mixtrain::plan
