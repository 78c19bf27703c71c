// Why: rotary position embeddings (Llama's RoPE, Hugging Face's
// rotate-half convention) on the GPU, forward and backward side by side:
// one thread per plane (element i and element i + HS/2 of one head at one
// position), in fp32 whatever the storage type. A thread reads both
// coordinates before it writes them, so out may be inp itself.
#include <cuda_runtime.h>

#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/cuda_dtype.cuh"
#include "engine/backend/cuda/cuda_error.h"
#include "engine/backend/cuda/cuda_kernel_utils.cuh"

namespace mixtrain {
namespace {

// out (or, accumulating, out +=) = inp (rows of `heads` heads of
// 2 * half) rotated by the angle of freqs[t][i] ((cos, sin) pairs), by
// +angle (`sign` 1) or back (`sign` -1); row r is at position r % seq.
template <bool kAccumulate, class Ref>
__global__ void rope_kernel(Ref out, Ref inp, const float* freqs, float sign, int64_t rows,
                            int64_t seq, int64_t heads, int64_t half) {
  const int64_t planes = rows * heads * half;
  for (int64_t p = gpu::thread_index(); p < planes; p += gpu::grid_size()) {
    const int64_t i = p % half;
    const int64_t head = p / half;  // (row, head) flattened
    const int64_t row = head / heads;
    const int64_t first = head * 2 * half + i, second = first + half;
    const float* angle = freqs + ((row % seq) * half + i) * 2;
    const float c = angle[0], s = sign * angle[1];
    const float x1 = inp.load(first), x2 = inp.load(second);
    float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
    if constexpr (kAccumulate) {
      y1 += out.load(first);
      y2 += out.load(second);
    }
    out.store(first, y1);
    out.store(second, y2);
  }
}

template <bool kAccumulate>
void rotate(cudaStream_t stream, const char* op, const Tensor& out, const Tensor& inp,
            const Tensor& freqs, float sign) {
  const int64_t rows = inp.dim(0) * inp.dim(1), seq = inp.dim(1), heads = inp.dim(2);
  const int64_t half = inp.dim(3) / 2;
  gpu::dispatch_compute({&out, &inp}, op, [&](auto policy) {
    using P = decltype(policy);
    if (rows * heads * half == 0) return;
    rope_kernel<kAccumulate>
        <<<gpu::grid_blocks(rows * heads * half), gpu::kBlockThreads, 0, stream>>>(
            P::ref(out), P::ref(inp), freqs.data_as<float>(), sign, rows, seq, heads, half);
    MIXTRAIN_CUDA_CHECK_LAUNCH("rope_kernel");
  });
}

}  // namespace

void CudaBackend::do_rope_forward(const Tensor& out, const Tensor& inp, const Tensor& freqs) {
  rotate<false>(begin_op(), "rope_forward", out, inp, freqs, 1.0f);
}

void CudaBackend::do_rope_backward(const Tensor& dinp, const Tensor& dout, const Tensor& freqs) {
  rotate<true>(begin_op(), "rope_backward", dinp, dout, freqs, -1.0f);
}

}  // namespace mixtrain
