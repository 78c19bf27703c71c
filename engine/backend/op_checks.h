// Why: every op of every backend validates its arguments on the host before
// touching memory (a kernel cannot throw), and a caller who got a shape or
// dtype wrong must read which op and which tensor ("layernorm_forward:
// weight bf16(96) must have 768 elements"). These helpers build those
// messages in one place; each throws EngineError(kInvalidArgument) and
// costs nothing when the check passes. An undefined tensor always fails.
#pragma once

#include <cstdint>

#include "engine/backend/tensor.h"
#include "engine/numerics/mx_scaling.h"

namespace mixtrain {
struct Fp8Operand;
struct MatmulOptions;
}

namespace mixtrain::op_checks {

// t's dtype is fp32, fp16 or bf16.
void check_float(const char* op, const char* name, const Tensor& t);

// t's dtype is a float format: fp32, fp16, bf16, fp8_e4m3 or fp8_e5m2.
void check_float_format(const char* op, const char* name, const Tensor& t);

// t's dtype is fp8_e4m3 or fp8_e5m2.
void check_fp8(const char* op, const char* name, const Tensor& t);

// MX block scales for the 2-D fp8 `codes` blocked along `axis`: e8m0,
// mx_scale_count(rows, cols, axis) elements.
void check_block_scales(const char* op, const Tensor& codes, const Tensor& block_scales,
                        MxAxis axis);

// `stats` is a tensor of fp8 statistics slots (Backend::fp8_stats_tensor)
// holding slot `slot`.
void check_stats_slot(const char* op, const Tensor& stats, int64_t slot);

// An fp8 GEMM operand: 2-D fp8 codes with either a finite positive scale or
// valid block scales.
void check_fp8_operand(const char* op, const char* name, const Fp8Operand& operand);

// The sizes of a 2-D GEMM: C (m,n) = op(A) (m,k) op(B) (k,n).
struct GemmShape {
  int64_t m, k, n;
};

// The sizes of matmul_fp8's product (computed, not checked).
GemmShape gemm_shape(const Fp8Operand& a, const Fp8Operand& b, const MatmulOptions& options);

// matmul_fp8's arguments (backend.h): two valid fp8 operands, MX blocks
// along the reduction dimension, 2-D shapes that make a product into C
// (fp32/fp16/bf16), bias (n) and gelu_out as matmul's, no bias_grad.
GemmShape check_matmul_fp8(const char* op, const Tensor& c, const Fp8Operand& a,
                           const Fp8Operand& b, const MatmulOptions& options);

// matmul's arguments (backend.h): A, B and C of fp32/fp16/bf16, all 2-D
// or all 3-D with one batch, A and B of one dtype, op(A) (M,K) op(B) (K,N)
// into C (M,N) sharing no byte with A or B; bias (N) of fp32 or C's dtype,
// apart from C; gelu_out and bias_grad as check_gelu_out and check_bias_grad.
void check_matmul(const char* op, const Tensor& c, const Tensor& a, const Tensor& b,
                  const MatmulOptions& options);

// The sizes of causal self-attention over qkv (B,T,3C) with n_head heads,
// as the attention ops' checks establish them (computed, not checked).
struct AttentionShape {
  int64_t batch, seq, channels, heads, head_size;
};
AttentionShape attention_shape(const Tensor& qkv, int n_head);

// The (N,C) rows of a layernorm's `inp` (computed, not checked).
struct RowShape {
  int64_t rows, channels;
};
RowShape row_shape(const Tensor& inp);

// t's dtype is exactly `dtype`.
void check_dtype(const char* op, const char* name, const Tensor& t, DType dtype);

// t has exactly `shape`.
void check_shape(const char* op, const char* name, const Tensor& t, const Shape& shape);

// t has `ndim` dimensions.
void check_ndim(const char* op, const char* name, const Tensor& t, int ndim);

// t has exactly `numel` elements.
void check_numel(const char* op, const char* name, const Tensor& t, int64_t numel);

// t is a (rows, cols) matrix once its leading dimensions are flattened: its
// last dimension is cols and it has rows * cols elements.
void check_matrix(const char* op, const char* name, const Tensor& t, int64_t rows, int64_t cols);

// a and b share no byte, or are the very same elements (same address,
// element size and element count), as in-place ops allow.
void check_same_or_disjoint(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                            const Tensor& b);

// matmul's optional GELU output: C's shape, fp32/fp16/bf16, no byte shared
// with C (it keeps the pre-activation). Nothing to check when null.
void check_gelu_out(const char* op, const Tensor& c, const Tensor* gelu_out);

// matmul's optional bias gradient: a 2-D product with trans_a, and (M)
// of fp32, fp16 or bf16 for A stored (K,M). Nothing to check when null.
void check_bias_grad(const char* op, const Tensor& a, bool trans_a, const Tensor* bias_grad);

// softmax_cross_entropy's classes: 0 (all `columns`) or in [1, columns];
// returns the number of classes in effect.
int64_t checked_classes(const char* op, int64_t classes, int64_t columns);

// Every value of the int32 host-readable tensor `ids` lies in [0, limit); otherwise the
// message names the first bad value, its index, and `limit_name` (e.g.
// "vocab size").
void check_ids(const char* op, const char* name, const Tensor& ids, int64_t limit,
               const char* limit_name);

}  // namespace mixtrain::op_checks
