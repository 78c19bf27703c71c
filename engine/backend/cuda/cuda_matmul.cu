// Why: the linear layer on the GPU: forward matmul through cuBLAS (fp32
// accumulate) and, beside it, bias_backward, the bias gradient of matmul.
// A linear layer with a bias or a GELU, or the weight gradient with its
// bias gradient, of one dtype runs as one cuBLASLt GEMM with them in its
// epilogue (gpu::linear_row_major_lt). Otherwise,
// two things cuBLAS cannot do directly are handled here:
//  * bias: C is first set to beta*C + bias by a small kernel, then the GEMM
//    runs with beta = 1, so the sum is rounded once, by cuBLAS;
//  * a C dtype cuBLAS cannot write from the A/B dtype (fp16 from bf16,
//    16-bit from fp32): the GEMM runs into an fp32 workspace prepared the
//    same way, which is then cast into C.
#include <cuda_runtime.h>

#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/cuda_dtype.cuh"
#include "engine/backend/cuda/cuda_error.h"
#include "engine/backend/cuda/cuda_gemm.h"
#include "engine/backend/cuda/cuda_kernel_utils.cuh"
#include "engine/backend/cuda/cuda_op_checks.h"
#include "engine/backend/op_checks.h"

namespace mixtrain {
namespace {

using gpu::grid_size;
using gpu::thread_index;

// Rows of dout one block of the column-sum kernel adds up.
constexpr int64_t kRowsPerColumnChunk = 64;
// At most this many row chunks: more parallelism adds nothing.
constexpr int64_t kMaxColumnChunks = 256;

// acc (rows, n) = beta * c + bias[col], reading c only when beta != 0 (c
// may hold garbage, even NaN, when beta is 0). acc may be c itself.
template <class Out, class Ref>
__global__ void init_accumulator_kernel(Out acc, Ref c, Ref bias, bool has_bias, float beta,
                                        int64_t rows, int64_t n) {
  const int64_t total = rows * n;
  for (int64_t i = thread_index(); i < total; i += grid_size()) {
    float value = beta != 0.0f ? beta * c.load(i) : 0.0f;
    if (has_bias) value += bias.load(i % n);
    acc.store(i, value);
  }
}

// partial[chunk][col] = sum of dout[row][col] over the chunk's rows, in
// row order. One thread per column, blocks tiled over (columns, chunks).
template <class Ref>
__global__ void column_sum_partial_kernel(float* partial, Ref dout, int64_t rows, int64_t n,
                                          int64_t rows_per_chunk) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= n) return;
  const int64_t begin = blockIdx.y * rows_per_chunk;
  const int64_t end = min(rows, begin + rows_per_chunk);
  float sum = 0.0f;
  for (int64_t r = begin; r < end; ++r) sum += dout.load(r * n + col);
  partial[blockIdx.y * n + col] = sum;
}

// dbias[col] += sum over chunks of partial[chunk][col], in chunk order.
template <class Ref>
__global__ void column_sum_finish_kernel(Ref dbias, const float* partial, int64_t chunks,
                                         int64_t n) {
  for (int64_t col = thread_index(); col < n; col += grid_size()) {
    float sum = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) sum += partial[k * n + col];
    dbias.store(col, dbias.load(col) + sum);
  }
}

struct MatmulShape {
  int64_t batch, m, k, n;
};

// The product's sizes (its arguments checked by Backend::matmul).
MatmulShape matmul_shape(const Tensor& c, const Tensor& a, const MatmulOptions& options) {
  return {c.ndim() == 3 ? c.dim(0) : 1, c.dim(-2), options.trans_a ? a.dim(-2) : a.dim(-1),
          c.dim(-1)};
}

}  // namespace

void CudaBackend::do_matmul(const Tensor& c, const Tensor& a, const Tensor& b,
                            const MatmulOptions& options) {
  const cudaStream_t stream = begin_op();
  const MatmulShape s = matmul_shape(c, a, options);
  const Tensor* bias = options.bias;
  const Tensor* gelu_out = options.gelu_out;
  const gpu::GemmOperand a_op{a.data(), a.dtype(), a.dim(-1), a.dim(-1) * a.dim(-2),
                              options.trans_a};
  const gpu::GemmOperand b_op{b.data(), b.dtype(), b.dim(-1), b.dim(-1) * b.dim(-2),
                              options.trans_b};
  const Tensor* bias_grad = options.bias_grad;
  // A linear layer: its bias and GELU, or its bias gradient, in cuBLASLt's
  // epilogue when it can.
  const gpu::GemmOutput c_lt{c.data(), c.dtype(), s.n, s.m * s.n};
  const bool one_dtype = a.dtype() == c.dtype() && (!bias || bias->dtype() == c.dtype()) &&
                         (!gelu_out || gelu_out->dtype() == c.dtype());
  if ((bias || gelu_out) && !bias_grad && s.batch == 1 && one_dtype &&
      gpu::linear_row_major_lt(blas(), s.m, s.n, s.k, a_op, b_op, c_lt, options.alpha,
                               options.beta,
                               {bias ? bias->data() : nullptr,
                                gelu_out ? gelu_out->data() : nullptr, nullptr})) {
    return;
  }
  if (bias_grad && !bias && !gelu_out && one_dtype) {
    // The epilogue writes the sums; the gradient accumulates them.
    const Tensor sums = scratch({{{s.m}, c.dtype()}})[0];
    if (gpu::linear_row_major_lt(blas(), s.m, s.n, s.k, a_op, b_op, c_lt, options.alpha,
                                 options.beta, {nullptr, nullptr, sums.data()})) {
      add(*bias_grad, *bias_grad, sums);
      return;
    }
  }
  // A linear layer whose epilogue cuBLASLt did not take: its bias, GELU or
  // bias gradient cost passes of their own below.
  if (bias || gelu_out || bias_grad) count_gemm_fallback();
  const bool direct = cublas_writes(a.dtype(), c.dtype());
  const bool prepare = bias != nullptr || (!direct && options.beta != 0.0f);
  const int64_t rows = s.batch * s.m;

  Tensor accumulator = c;
  if (!direct) accumulator = scratch({{c.shape(), DType::kF32}})[0];
  if (prepare && rows * s.n > 0) {
    gpu::dispatch_compute({&c, bias}, "matmul", [&](auto policy) {
      using P = decltype(policy);
      const auto bias_ref = bias != nullptr ? P::ref(*bias) : P::none();
      const unsigned blocks = gpu::grid_blocks(rows * s.n);
      if (direct) {
        init_accumulator_kernel<<<blocks, gpu::kBlockThreads, 0, stream>>>(
            P::ref(c), P::ref(c), bias_ref, bias != nullptr, options.beta, rows, s.n);
      } else {
        init_accumulator_kernel<<<blocks, gpu::kBlockThreads, 0, stream>>>(
            gpu::Typed<float>{accumulator.data_as<float>()}, P::ref(c), bias_ref,
            bias != nullptr, options.beta, rows, s.n);
      }
      MIXTRAIN_CUDA_CHECK_LAUNCH("init_accumulator_kernel");
    });
  }
  const float beta = prepare ? 1.0f : (direct ? options.beta : 0.0f);
  const gpu::GemmOutput c_out{accumulator.data(), accumulator.dtype(), s.n, s.m * s.n};
  gpu::gemm_row_major(blas(), s.m, s.n, s.k, a_op, b_op, c_out, s.batch, options.alpha, beta);
  if (!direct) cast(c, accumulator);
  if (gelu_out != nullptr) gelu_forward(*gelu_out, c);
  if (bias_grad != nullptr) bias_backward(*bias_grad, a);
}

void CudaBackend::do_bias_backward(const Tensor& dbias, const Tensor& dout) {
  const cudaStream_t stream = begin_op();
  const int64_t n = dout.dim(-1);
  const int64_t rows = n == 0 ? 0 : dout.numel() / n;
  if (n == 0 || rows == 0) return;
  const int64_t chunks =
      std::min(kMaxColumnChunks, (rows + kRowsPerColumnChunk - 1) / kRowsPerColumnChunk);
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  const Tensor partial = scratch({{{chunks, n}, DType::kF32}})[0];
  gpu::dispatch_compute({&dbias, &dout}, "bias_backward", [&](auto policy) {
    using P = decltype(policy);
    // One thread per column: the grid covers every column exactly.
    const dim3 grid(static_cast<unsigned>(gpu::checked_int(
                        "bias_backward", "column blocks", (n + gpu::kBlockThreads - 1) /
                                                              gpu::kBlockThreads)),
                    static_cast<unsigned>(chunks));
    column_sum_partial_kernel<<<grid, gpu::kBlockThreads, 0, stream>>>(
        partial.data_as<float>(), P::ref(dout), rows, n, rows_per_chunk);
    MIXTRAIN_CUDA_CHECK_LAUNCH("column_sum_partial_kernel");
    column_sum_finish_kernel<<<gpu::grid_blocks(n), gpu::kBlockThreads, 0, stream>>>(
        P::ref(dbias), partial.data_as<float>(), chunks, n);
    MIXTRAIN_CUDA_CHECK_LAUNCH("column_sum_finish_kernel");
  });
}

}  // namespace mixtrain
