// Why: see cuda_workspace.h.
#include "engine/backend/cuda_workspace.h"

namespace mixtrain {
namespace {

constexpr size_t kScratchAlignment = 256;
constexpr size_t kScratchGranularity = size_t{2} << 20;

size_t round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace

size_t cublas_workspace_bytes(int compute_capability) {
  return compute_capability >= 90 ? size_t{32} << 20 : size_t{4} << 20;
}

std::vector<size_t> scratch_offsets(const std::vector<ScratchRequest>& requests) {
  std::vector<size_t> offsets;
  size_t total = 0;
  for (const ScratchRequest& r : requests) {
    offsets.push_back(total);
    total += round_up(static_cast<size_t>(shape_numel(r.shape)) * dtype_size(r.dtype),
                      kScratchAlignment);
  }
  offsets.push_back(total);
  return offsets;
}

size_t scratch_buffer_bytes(size_t bytes) { return round_up(bytes, kScratchGranularity); }

bool cublas_writes(DType ab, DType c) {
  if (ab == c) return is_float_compute(ab);
  return c == DType::kF32 && (ab == DType::kF16 || ab == DType::kBF16);
}

DType attention_score_gradient_dtype(DType gemm) {
  return gemm == DType::kF16 ? DType::kF32 : gemm;
}

std::vector<ScratchRequest> attention_forward_scratch(const AttentionDims& dims, DType qkv,
                                                      DType att, DType out) {
  const int64_t B = dims.batch, T = dims.seq, C = dims.channels, NH = dims.heads;
  return {{{B, NH, T, T}, DType::kF32},
          {att != qkv ? Shape{B, NH, T, T} : Shape{0}, qkv},
          {cublas_writes(qkv, out) ? Shape{0} : Shape{B, T, C}, DType::kF32}};
}

std::vector<ScratchRequest> attention_backward_scratch(const AttentionDims& dims, DType qkv,
                                                       DType dout, DType att, DType dqkv) {
  const int64_t B = dims.batch, T = dims.seq, C = dims.channels, NH = dims.heads;
  const DType gs = attention_score_gradient_dtype(qkv);
  const bool dqkv_direct = cublas_writes(qkv, dqkv) && cublas_writes(gs, dqkv);
  return {{{B, NH, T, T}, DType::kF32},
          {{B, NH, T, T}, gs},
          {dout != qkv ? Shape{B, T, C} : Shape{0}, qkv},
          {att != qkv ? Shape{B, NH, T, T} : Shape{0}, qkv},
          {dqkv_direct ? Shape{0} : Shape{B, T, 3 * C}, DType::kF32},
          {gs != qkv ? Shape{B, T, 3 * C} : Shape{0}, gs}};
}

}  // namespace mixtrain
