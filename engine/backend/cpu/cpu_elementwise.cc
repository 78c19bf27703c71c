// Why: the CPU backend's data-movement and elementwise ops: cast, fill,
// set_zero and the residual add. Conversions go through numerics/convert
// (vectorized, bit-exact with the scalar rules); the rest are chunked
// OpenMP loops over fp32 spans (cpu_elementwise.h).
#include "engine/backend/cpu/cpu_elementwise.h"

#include <algorithm>
#include <cstring>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/common/cpu_features.h"
#include "engine/numerics/convert.h"

namespace mixtrain {

MIXTRAIN_MULTIVERSION void cpu_ops::add_into(float* dst, const float* src, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

namespace {

// Bytes per chunk of set_zero's parallel memset.
constexpr int64_t kZeroChunkBytes = int64_t{1} << 18;

// out = a + b over n elements; out may equal a or b.
MIXTRAIN_MULTIVERSION void add_spans(float* out, const float* a, const float* b, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

}  // namespace

using cpu_ops::kElementwiseChunk;
using cpu_ops::map_elementwise;
using cpu_ops::OutputMode;
using cpu_ops::parallel_chunks;

void CpuBackend::do_cast(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0 || dst.data() == src.data()) return;  // the same tensor: nothing to do
  convert(src.data(), src.dtype(), dst.data(), dst.dtype(), static_cast<size_t>(dst.numel()));
}

void CpuBackend::do_fill(const Tensor& t, float value) {
  dispatch_float(t.dtype(), "fill", [&](auto tag) {
    using T = decltype(tag);
    const T stored = from_float<T>(value);
    T* data = static_cast<T*>(t.data());
    parallel_chunks(t.numel(), kElementwiseChunk,
                    [&](int64_t begin, int64_t n) { std::fill_n(data + begin, n, stored); });
  });
}

void CpuBackend::do_set_zero(const Tensor& t) {
  if (t.nbytes() == 0) return;
  char* bytes = static_cast<char*>(t.data());
  parallel_chunks(static_cast<int64_t>(t.nbytes()), kZeroChunkBytes,
                  [&](int64_t begin, int64_t n) { std::memset(bytes + begin, 0, n); });
}

void CpuBackend::do_add(const Tensor& out, const Tensor& a, const Tensor& b) {
  map_elementwise(*this, out, OutputMode::kOverwrite, add_spans, a, b);
}

}  // namespace mixtrain
