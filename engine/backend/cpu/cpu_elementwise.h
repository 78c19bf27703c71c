// Why: the elementwise CPU ops (add, GELU, ...) share one shape of loop:
// cut the flat tensors into fixed chunks, view each chunk as fp32, run an
// fp32 span kernel, store the result in the output's dtype. That loop lives
// here once, with the span kernels other ops reuse.
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_fp32_view.h"
#include "engine/backend/cpu/cpu_parallel.h"

namespace mixtrain::cpu_ops {

// Elements per chunk of elementwise work: a few fp32 buffers of this size
// stay in L1/L2 while a chunk is converted, computed and stored.
inline constexpr int64_t kElementwiseChunk = 4096;

// dst[i] += src[i] for i in [0, n); dst may equal src.
void add_into(float* dst, const float* src, int64_t n);

// Whether map_elementwise's kernel overwrites the output span or adds into
// it (the span then starts out holding the output's current values).
enum class OutputMode { kOverwrite, kAccumulate };

// Calls kernel(out_span, input_spans..., n) over out's flat elements in
// fixed chunks spread over OpenMP threads; every span is fp32 whatever the
// tensors' dtypes (fp32/fp16/bf16, validated by the caller), and inputs
// have out.numel() elements. out may be one of the inputs (same elements)
// when the kernel reads element i before writing element i.
template <class Kernel, class... Inputs>
void map_elementwise(Backend& backend, const Tensor& out, OutputMode mode, Kernel&& kernel,
                     const Inputs&... inputs) {
  constexpr int64_t kSpans = sizeof...(Inputs) + 1;
  const ThreadScratch scratch(backend, kSpans * kElementwiseChunk);
  const Fp32View out_view(out);
  const std::array<Fp32View, sizeof...(Inputs)> in_views{Fp32View(inputs)...};
  parallel_chunks(out.numel(), kElementwiseChunk, [&](int64_t begin, int64_t n) {
    float* buffers = scratch.mine();
    float* out_span = mode == OutputMode::kAccumulate ? out_view.update(begin, n, buffers)
                                                      : out_view.overwrite(begin, n, buffers);
    [&]<size_t... I>(std::index_sequence<I...>) {
      kernel(out_span, in_views[I].read(begin, n, buffers + (I + 1) * kElementwiseChunk)..., n);
    }
    (std::index_sequence_for<Inputs...>{});
    out_view.commit(begin, n, out_span);
  });
}

}  // namespace mixtrain::cpu_ops
