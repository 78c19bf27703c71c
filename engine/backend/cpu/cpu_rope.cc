// Why: rotary position embeddings (Llama's RoPE, Hugging Face's
// rotate-half convention), forward and backward side by side, on rows of
// (B,T,H,HS): each head's first and second halves are the two coordinates
// of HS/2 planes, each rotated by its position's angle. The backward
// rotates the gradient back by the same angle (a rotation's transpose).
#include <algorithm>
#include <cstdint>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/cpu_fp32_view.h"
#include "engine/backend/cpu/cpu_parallel.h"
#include "engine/common/cpu_features.h"

namespace mixtrain {

using cpu_ops::Fp32View;
using cpu_ops::ThreadScratch;

namespace {

// One position's row of `heads` heads of `head_size`: out = x rotated by
// (cos, sin) = freqs[i] (interleaved pairs), by +angle (`sign` 1) or back
// (`sign` -1). out and x are distinct.
MIXTRAIN_MULTIVERSION void rotate_row(float* out, const float* x, const float* freqs, int64_t heads,
                                      int64_t head_size, float sign) {
  const int64_t half = head_size / 2;
  for (int64_t h = 0; h < heads; ++h) {
    const float* xh = x + h * head_size;
    float* oh = out + h * head_size;
#pragma omp simd
    for (int64_t i = 0; i < half; ++i) {
      const float c = freqs[2 * i], s = sign * freqs[2 * i + 1];
      oh[i] = xh[i] * c - xh[i + half] * s;
      oh[i + half] = xh[i + half] * c + xh[i] * s;
    }
  }
}

// out (or, accumulating, out +=) = inp rotated row by row; the row of
// position t reads freqs[t].
void rotate(CpuBackend& backend, const Tensor& out, const Tensor& inp, const Tensor& freqs,
            float sign, bool accumulate) {
  const int64_t batch = inp.dim(0), seq = inp.dim(1), heads = inp.dim(2), head_size = inp.dim(3);
  const int64_t width = heads * head_size;
  const ThreadScratch scratch(backend, 3 * width);
  const Fp32View inp_view(inp);
  const Fp32View out_view(out);
  const float* table = freqs.data_as<float>();
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < batch * seq; ++row) {
    float* buffers = scratch.mine();
    const int64_t at = row * width;
    const float* x = inp_view.read(at, width, buffers);
    float* rotated = buffers + width;
    rotate_row(rotated, x, table + (row % seq) * head_size, heads, head_size, sign);
    float* o = accumulate ? out_view.update(at, width, buffers + 2 * width)
                          : out_view.overwrite(at, width, buffers + 2 * width);
    for (int64_t i = 0; i < width; ++i) o[i] = accumulate ? o[i] + rotated[i] : rotated[i];
    out_view.commit(at, width, o);
  }
}

}  // namespace

void CpuBackend::do_rope_forward(const Tensor& out, const Tensor& inp, const Tensor& freqs) {
  rotate(*this, out, inp, freqs, 1.0f, /*accumulate=*/false);
}

void CpuBackend::do_rope_backward(const Tensor& dinp, const Tensor& dout, const Tensor& freqs) {
  rotate(*this, dinp, dout, freqs, -1.0f, /*accumulate=*/true);
}

}  // namespace mixtrain
