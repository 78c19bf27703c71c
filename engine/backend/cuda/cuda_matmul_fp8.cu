// Why: matmul_fp8 on fp8 tensor cores. Two per-tensor operands become one
// cuBLASLt fp8 GEMM (sm_89 and newer) with their 1/scale as cuBLASLt's A
// and B scale pointers, written by a one-thread kernel so that nothing
// waits for the host. Ada's and Hopper's fp8 kernels take only the "TN"
// layout (both operands with the reduction dimension contiguous), so an
// operand stored the other way (the backward's W and the weight
// gradient's two) is transposed first: one byte per element, exact, as
// Transformer Engine keeps "columnwise" copies. Two MX-blocked operands
// become a block-scaled GEMM on sm_100 and newer (VEC32_UE8M0 scales,
// transposed with their codes and tiled as cuBLASLt reads them); before
// sm_100, built against a cuBLAS older than 12.8 (said once), and for
// anything cuBLASLt refuses, Backend's shared path runs (each such GEMM
// counted in gemm_fallbacks):
// dequantize to bf16, then the bf16 GEMM. No AMAX_D_POINTER: cuBLASLt
// computes D's amax only for fp8 outputs (it refuses it for fp8 inputs
// with a bf16 D, as PyTorch's scaled_mm found), these GEMMs write bf16, and
// the amaxes the recipes need are of the inputs, which quantize_fp8 takes.
#include <cuda_runtime.h>

#include <iostream>

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

// The tiled layout cuBLASLt reads VEC32_UE8M0 scales in, from a row-major
// (rows, blocks) matrix: 128 x 4 tiles of 512 bytes in row-major order of
// tiles, entry (r, c) of a tile at (r % 32) * 16 + (r / 32) * 4 + c, the
// padding zero. One thread per byte of the `cells` of the tiles.
__global__ void tile_mx_scales_kernel(uint8_t* out, const uint8_t* in, int64_t rows, int64_t blocks,
                                      int64_t cells) {
  const int64_t tile_cols = (blocks + 3) / 4;
  for (int64_t i = gpu::thread_index(); i < cells; i += gpu::grid_size()) {
    const int64_t tile = i / 512, within = i % 512;
    const int64_t r = (tile / tile_cols) * 128 + (within / 4) % 4 * 32 + within / 16;
    const int64_t col = (tile % tile_cols) * 4 + within % 4;
    out[i] = r < rows && col < blocks ? in[r * blocks + col] : 0;
  }
}

__global__ void write_scales_kernel(float* out, float a, float b) {
  out[0] = a;
  out[1] = b;
}

}  // namespace

void CudaBackend::do_matmul_fp8(const Tensor& c, const Fp8Operand& a, const Fp8Operand& b,
                                const MatmulOptions& options) {
  const op_checks::GemmShape s = op_checks::gemm_shape(a, b, options);
  const bool per_tensor = !a.block_scales.defined() && !b.block_scales.defined();
  const bool blocks = a.block_scales.defined() && b.block_scales.defined();
  const bool e5m2_pair = a.codes.dtype() == DType::kFP8E5M2 && b.codes.dtype() == DType::kFP8E5M2;
  const bool one_dtype = (!options.bias || options.bias->dtype() == c.dtype()) &&
                         (!options.gelu_out || options.gelu_out->dtype() == c.dtype());
  if (blocks && compute_capability_ >= 100 && !gpu::kLtBlockScaledFp8) {
    static const bool said = [] {
      std::cerr << "mixtrain: MXFP8 GEMMs dequantize to bf16: this build's cuBLAS ("
                << CUBLAS_VERSION << ") predates 12.8's block-scaled fp8 GEMM\n";
      return true;
    }();
    (void)said;
  }
  const bool kernels = per_tensor ? compute_capability_ >= 89
                                  : blocks && compute_capability_ >= 100 && gpu::kLtBlockScaledFp8;
  if (s.m == 0 || s.n == 0 || s.k == 0) {
    Backend::do_matmul_fp8(c, a, b, options);
    return;
  }
  // cuBLASLt takes no bias of D's type on an fp8 GEMM with an fp32 D (its
  // fp8 table; PyTorch's _scaled_mm refuses the bias there): the bias is
  // added after, by a rank-1 GEMM. With a GELU after the bias, the whole
  // layer takes the shared path.
  const bool bias_after = c.dtype() == DType::kF32 && options.bias != nullptr;
  if (!kernels || e5m2_pair || !one_dtype || (bias_after && options.gelu_out != nullptr)) {
    count_gemm_fallback();
    Backend::do_matmul_fp8(c, a, b, options);
    return;
  }
  const cudaStream_t stream = begin_op();
  // A as (m,k) and B as (n,k), each transposed into scratch when stored
  // the other way, and with MX blocks their scales as (rows, k / 32),
  // transposed the same way, then tiled; or the two per-tensor scales.
  const int64_t kb = (s.k + kMxBlockSize - 1) / kMxBlockSize;
  auto bytes = [](int64_t n) { return ScratchRequest::raw_bytes(static_cast<size_t>(n)); };
  const std::vector<Tensor> work =
      scratch({{options.trans_a ? Shape{s.m, s.k} : Shape{0}, a.codes.dtype()},
               {options.trans_b ? Shape{0} : Shape{s.n, s.k}, b.codes.dtype()},
               bytes(blocks && options.trans_a ? s.m * kb : 0),
               bytes(blocks && !options.trans_b ? s.n * kb : 0),
               bytes(blocks ? gpu::tiled_mx_scale_bytes(s.m, s.k) : 0),
               bytes(blocks ? gpu::tiled_mx_scale_bytes(s.n, s.k) : 0),
               {{2}, DType::kF32}});
  // `bytes_in` (rows, cols) as (cols, rows) in `spare` when `transpose`.
  auto k_contiguous = [&](const void* bytes_in, int64_t rows, int64_t cols, bool transpose,
                          const Tensor& spare) -> const void* {
    if (!transpose) return bytes_in;
    transpose_bytes_kernel<<<gpu::grid_blocks(rows * cols), gpu::kBlockThreads, 0, stream>>>(
        static_cast<uint8_t*>(spare.data()), static_cast<const uint8_t*>(bytes_in), rows, cols);
    MIXTRAIN_CUDA_CHECK_LAUNCH("transpose_bytes_kernel");
    return spare.data();
  };
  const void* a_codes =
      k_contiguous(a.codes.data(), a.codes.dim(0), a.codes.dim(1), options.trans_a, work[0]);
  const void* b_codes =
      k_contiguous(b.codes.data(), b.codes.dim(0), b.codes.dim(1), !options.trans_b, work[1]);
  gpu::Fp8GemmScales scales;
  if (blocks) {
    // Blocked along k: stored (rows, kb) when k is the stored rows'
    // direction, else (kb, rows).
    auto tiled = [&](const Tensor& block_scales, int64_t rows, bool stored_k_first,
                     const Tensor& spare, const Tensor& out) {
      const void* row_major = k_contiguous(block_scales.data(), kb, rows, stored_k_first, spare);
      const int64_t cells = gpu::tiled_mx_scale_bytes(rows, s.k);
      tile_mx_scales_kernel<<<gpu::grid_blocks(cells), gpu::kBlockThreads, 0, stream>>>(
          static_cast<uint8_t*>(out.data()), static_cast<const uint8_t*>(row_major), rows, kb,
          cells);
      MIXTRAIN_CUDA_CHECK_LAUNCH("tile_mx_scales_kernel");
      return out.data();
    };
    scales = {tiled(a.block_scales, s.m, options.trans_a, work[2], work[4]),
              tiled(b.block_scales, s.n, !options.trans_b, work[3], work[5]), true};
  } else {
    float* both = work[6].data_as<float>();
    write_scales_kernel<<<1, 1, 0, stream>>>(both, 1.0f / a.scale, 1.0f / b.scale);
    MIXTRAIN_CUDA_CHECK_LAUNCH("write_scales_kernel");
    scales = {both, both + 1, false};
  }

  const gpu::GemmOperand a_op{a_codes, a.codes.dtype(), s.k, 0, false};
  const gpu::GemmOperand b_op{b_codes, b.codes.dtype(), s.k, 0, true};
  const gpu::GemmOutput c_op{c.data(), c.dtype(), s.n, 0};
  const gpu::LinearEpilogue epilogue{
      options.bias && !bias_after ? options.bias->data() : nullptr,
      options.gelu_out ? options.gelu_out->data() : nullptr, nullptr};
  if (gpu::linear_row_major_lt(blas(), s.m, s.n, s.k, a_op, b_op, c_op, options.alpha, options.beta,
                               epilogue, scales)) {
    if (bias_after) {  // C (m, n) += ones (m, 1) x bias (1, n)
      const Tensor ones = scratch({{{s.m, 1}, DType::kF32}})[0];
      fill(ones, 1.0f);
      MatmulOptions add_bias;
      add_bias.beta = 1.0f;
      matmul(c, ones, options.bias->reshape({1, s.n}), add_bias);
    }
    return;
  }
  // The transposes and scales above are stream-ordered scratch: leaving
  // them unused costs nothing more.
  count_gemm_fallback();
  Backend::do_matmul_fp8(c, a, b, options);
}

}  // namespace mixtrain
