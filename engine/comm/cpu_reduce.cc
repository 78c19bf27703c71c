// Why: see cpu_reduce.h. The loops are plain so that the compiler
// vectorizes them; the 16-bit conversions are numerics/float16.h's.
#include "engine/comm/cpu_reduce.h"

#include <cmath>

namespace mixtrain {
namespace {

template <class T, class F>
void combine(T* dst, const T* a, const T* b, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) dst[i] = from_float<T>(f(to_float(a[i]), to_float(b[i])));
}

}  // namespace

void reduce_elements(void* dst, const void* a, const void* b, int64_t n, DType dtype, ReduceOp op) {
  dispatch_float(dtype, "reduce", [&](auto zero) {
    using T = decltype(zero);
    auto* d = static_cast<T*>(dst);
    const auto* x = static_cast<const T*>(a);
    const auto* y = static_cast<const T*>(b);
    if (op == ReduceOp::kSum) {
      combine(d, x, y, n, [](float p, float q) { return p + q; });
    } else {
      combine(d, x, y, n, [](float p, float q) { return p > q || std::isnan(p) ? p : q; });
    }
  });
}

}  // namespace mixtrain
