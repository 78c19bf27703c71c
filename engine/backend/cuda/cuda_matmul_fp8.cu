// Why: matmul_fp8 on fp8 tensor cores. Two per-tensor operands become one
// cuBLASLt fp8 GEMM (sm_89 and newer) with their 1/scale as cuBLASLt's A
// and B scale pointers, written by a one-thread kernel so that nothing
// waits for the host. Ada's and Hopper's fp8 kernels take only the "TN"
// layout (both operands with the reduction dimension contiguous), so an
// operand stored the other way (the backward's W and the weight
// gradient's two) is transposed first: one byte per element, exact, as
// Transformer Engine keeps "columnwise" copies. MX-blocked operands (block
// scaling is sm_100's VEC32_UE8M0 kernels, with a tiled scale layout of
// their own) and anything cuBLASLt refuses take Backend's shared path:
// dequantize to bf16, then the bf16 GEMM. No AMAX_D_POINTER: cuBLASLt
// computes D's amax only for fp8 outputs (it refuses it for fp8 inputs
// with a bf16 D, as PyTorch's scaled_mm found), these GEMMs write bf16, and
// the amaxes the recipes need are of the inputs, which quantize_fp8 takes.
#include <cuda_runtime.h>

#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/cuda_error.h"
#include "engine/backend/cuda/cuda_gemm.h"
#include "engine/backend/cuda/cuda_kernel_utils.cuh"
#include "engine/backend/op_checks.h"

namespace mixtrain {
namespace {

// out (cols, rows) = in (rows, cols)^T, bytes.
__global__ void transpose_bytes_kernel(uint8_t* out, const uint8_t* in, int64_t rows,
                                       int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = gpu::thread_index(); i < n; i += gpu::grid_size()) {
    const int64_t r = i / cols, c = i % cols;
    out[c * rows + r] = in[i];
  }
}

__global__ void write_scales_kernel(float* out, float a, float b) {
  out[0] = a;
  out[1] = b;
}

}  // namespace

void CudaBackend::matmul_fp8(const Tensor& c, const Fp8Operand& a, const Fp8Operand& b,
                             const MatmulOptions& options) {
  const op_checks::GemmShape s = op_checks::check_matmul_fp8("matmul_fp8", c, a, b, options);
  const bool per_tensor = !a.block_scales.defined() && !b.block_scales.defined();
  const bool e5m2_pair = a.codes.dtype() == DType::kFP8E5M2 && b.codes.dtype() == DType::kFP8E5M2;
  const bool one_dtype = (!options.bias || options.bias->dtype() == c.dtype()) &&
                         (!options.gelu_out || options.gelu_out->dtype() == c.dtype());
  if (!per_tensor || e5m2_pair || !one_dtype || compute_capability_ < 89 || s.m == 0 || s.n == 0 ||
      s.k == 0) {
    Backend::matmul_fp8(c, a, b, options);
    return;
  }
  const cudaStream_t stream = begin_op();
  // A as (m,k) and B as (n,k), each transposed into scratch when stored
  // the other way; then the two scales.
  const std::vector<Tensor> work =
      scratch({{options.trans_a ? Shape{s.m, s.k} : Shape{0}, a.codes.dtype()},
               {options.trans_b ? Shape{0} : Shape{s.n, s.k}, b.codes.dtype()},
               {{2}, DType::kF32}});
  auto k_contiguous = [&](const Tensor& codes, bool stored_k_first, const Tensor& spare) {
    if (!stored_k_first) return codes;
    transpose_bytes_kernel<<<gpu::grid_blocks(codes.numel()), gpu::kBlockThreads, 0, stream>>>(
        static_cast<uint8_t*>(spare.data()), static_cast<const uint8_t*>(codes.data()),
        codes.dim(0), codes.dim(1));
    MIXTRAIN_CUDA_CHECK_LAUNCH("transpose_bytes_kernel");
    return spare;
  };
  const Tensor a_codes = k_contiguous(a.codes, options.trans_a, work[0]);
  const Tensor b_codes = k_contiguous(b.codes, !options.trans_b, work[1]);
  float* scales = work[2].data_as<float>();
  write_scales_kernel<<<1, 1, 0, stream>>>(scales, 1.0f / a.scale, 1.0f / b.scale);
  MIXTRAIN_CUDA_CHECK_LAUNCH("write_scales_kernel");

  const gpu::GemmOperand a_op{a_codes.data(), a_codes.dtype(), s.k, 0, false};
  const gpu::GemmOperand b_op{b_codes.data(), b_codes.dtype(), s.k, 0, true};
  const gpu::GemmOutput c_op{c.data(), c.dtype(), s.n, 0};
  const gpu::LinearEpilogue epilogue{options.bias ? options.bias->data() : nullptr,
                                     options.gelu_out ? options.gelu_out->data() : nullptr,
                                     nullptr};
  if (gpu::linear_row_major_lt(blas(), s.m, s.n, s.k, a_op, b_op, c_op, options.alpha, options.beta,
                               epilogue, {scales, scales + 1})) {
    return;
  }
  // The transposes and scales above are stream-ordered scratch: leaving
  // them unused costs nothing more.
  Backend::matmul_fp8(c, a, b, options);
}

}  // namespace mixtrain
