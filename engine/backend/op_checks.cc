// Why: the messages of the ops' argument checks (see op_checks.h).
#include "engine/backend/op_checks.h"

#include <cmath>
#include <string>

#include "engine/backend/backend.h"

namespace mixtrain::op_checks {
namespace {

[[noreturn]] void fail(const char* op, const char* name, const Tensor& t,
                       const std::string& problem) {
  throw EngineError(ErrorCode::kInvalidArgument,
                    std::string(op) + ": " + name + " " + t.describe() + " " + problem);
}

void check_defined(const char* op, const char* name, const Tensor& t) {
  if (!t.defined()) {
    throw EngineError(ErrorCode::kInvalidArgument, std::string(op) + ": " + name + " is undefined");
  }
}

}  // namespace

void check_float(const char* op, const char* name, const Tensor& t) {
  check_defined(op, name, t);
  if (!is_float_compute(t.dtype())) fail(op, name, t, "must be fp32, fp16 or bf16");
}

void check_float_format(const char* op, const char* name, const Tensor& t) {
  check_defined(op, name, t);
  if (!is_float_compute(t.dtype()) && !is_fp8(t.dtype())) {
    fail(op, name, t, "must be a float format (fp32, fp16, bf16, fp8_e4m3, fp8_e5m2)");
  }
}

void check_fp8(const char* op, const char* name, const Tensor& t) {
  check_defined(op, name, t);
  if (!is_fp8(t.dtype())) fail(op, name, t, "must be fp8_e4m3 or fp8_e5m2");
}

void check_block_scales(const char* op, const Tensor& codes, const Tensor& block_scales,
                        MxAxis axis) {
  check_ndim(op, "codes", codes, 2);
  check_dtype(op, "block_scales", block_scales, DType::kE8M0);
  check_numel(op, "block_scales", block_scales, mx_scale_count(codes.dim(0), codes.dim(1), axis));
}

void check_stats_slot(const char* op, const Tensor& stats, int64_t slot) {
  check_dtype(op, "stats", stats, DType::kI32);
  if (stats.numel() % kFp8StatsWords != 0 || slot < 0 || slot >= stats.numel() / kFp8StatsWords) {
    fail(op, "stats", stats, "holds no statistics slot " + std::to_string(slot));
  }
}

void check_fp8_operand(const char* op, const char* name, const Fp8Operand& operand) {
  check_fp8(op, name, operand.codes);
  check_ndim(op, name, operand.codes, 2);
  if (operand.block_scales.defined()) {
    check_block_scales(op, operand.codes, operand.block_scales, operand.block_axis);
  } else if (!std::isfinite(operand.scale) || !(operand.scale > 0.0f)) {
    fail(op, name, operand.codes,
         "has scale " + std::to_string(operand.scale) + "; it must be finite and positive");
  }
}

void check_dtype(const char* op, const char* name, const Tensor& t, DType dtype) {
  check_defined(op, name, t);
  if (t.dtype() != dtype) fail(op, name, t, std::string("must be ") + dtype_name(dtype));
}

void check_shape(const char* op, const char* name, const Tensor& t, const Shape& shape) {
  check_defined(op, name, t);
  if (t.shape() != shape) fail(op, name, t, "must have shape " + shape_string(shape));
}

void check_ndim(const char* op, const char* name, const Tensor& t, int ndim) {
  check_defined(op, name, t);
  if (t.ndim() != ndim) fail(op, name, t, "must have " + std::to_string(ndim) + " dimensions");
}

void check_numel(const char* op, const char* name, const Tensor& t, int64_t numel) {
  check_defined(op, name, t);
  if (t.numel() != numel) {
    fail(op, name, t, "must have " + std::to_string(numel) + " elements");
  }
}

void check_matrix(const char* op, const char* name, const Tensor& t, int64_t rows, int64_t cols) {
  check_defined(op, name, t);
  const bool ok = t.numel() == rows * cols && (t.numel() == 0 || t.dim(-1) == cols);
  if (!ok) {
    fail(op, name, t,
         "must be (" + std::to_string(rows) + ", " + std::to_string(cols) +
             ") once its leading dimensions are flattened");
  }
}

void check_same_or_disjoint(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                            const Tensor& b) {
  check_defined(op, a_name, a);
  check_defined(op, b_name, b);
  if (a.nbytes() == 0 || b.nbytes() == 0) return;
  const auto* a_begin = static_cast<const char*>(a.data());
  const auto* b_begin = static_cast<const char*>(b.data());
  const bool disjoint = a_begin + a.nbytes() <= b_begin || b_begin + b.nbytes() <= a_begin;
  const bool same = a_begin == b_begin && dtype_size(a.dtype()) == dtype_size(b.dtype()) &&
                    a.numel() == b.numel();
  if (!disjoint && !same) {
    fail(op, a_name, a,
         std::string("partly overlaps ") + b_name + " " + b.describe() +
             " (they must be the same tensor or not overlap at all)");
  }
}

void check_gelu_out(const char* op, const Tensor& c, const Tensor* gelu_out) {
  if (gelu_out == nullptr) return;
  check_float(op, "gelu_out", *gelu_out);
  check_shape(op, "gelu_out", *gelu_out, c.shape());
  check_same_or_disjoint(op, "gelu_out", *gelu_out, "C", c);
  if (gelu_out->nbytes() > 0 && gelu_out->data() == c.data()) {
    fail(op, "gelu_out", *gelu_out, "is C itself; C keeps the pre-activation");
  }
}

void check_bias_grad(const char* op, const Tensor& a, bool trans_a, const Tensor* bias_grad) {
  if (bias_grad == nullptr) return;
  check_float(op, "bias_grad", *bias_grad);
  if (!trans_a || a.ndim() != 2) {
    fail(op, "bias_grad", *bias_grad,
         "needs a 2-D product with trans_a (A, the output gradient, stored (K,M)), got A " +
             a.describe() + (trans_a ? "" : " without trans_a"));
  }
  check_shape(op, "bias_grad", *bias_grad, {a.dim(1)});
}

GemmShape gemm_shape(const Fp8Operand& a, const Fp8Operand& b, const MatmulOptions& options) {
  return {options.trans_a ? a.codes.dim(1) : a.codes.dim(0),
          options.trans_a ? a.codes.dim(0) : a.codes.dim(1),
          options.trans_b ? b.codes.dim(0) : b.codes.dim(1)};
}

GemmShape check_matmul_fp8(const char* op, const Tensor& c, const Fp8Operand& a,
                           const Fp8Operand& b, const MatmulOptions& options) {
  check_fp8_operand(op, "a", a);
  check_fp8_operand(op, "b", b);
  const GemmShape s = gemm_shape(a, b, options);
  const auto check_reduction_axis = [&](const char* name, const Fp8Operand& operand,
                                        MxAxis reduction) {
    if (operand.block_scales.defined() && operand.block_axis != reduction) {
      fail(op, name, operand.codes,
           "is blocked along the wrong axis: MX blocks must run along the GEMM's reduction "
           "dimension");
    }
  };
  check_reduction_axis("a", a, options.trans_a ? MxAxis::kAlongColumns : MxAxis::kAlongRows);
  check_reduction_axis("b", b, options.trans_b ? MxAxis::kAlongRows : MxAxis::kAlongColumns);
  if ((options.trans_b ? b.codes.dim(1) : b.codes.dim(0)) != s.k) {
    fail(op, "b", b.codes, "does not share A " + a.codes.describe() + "'s inner dimension");
  }
  check_float(op, "C", c);
  check_shape(op, "C", c, {s.m, s.n});
  if (options.bias != nullptr) {
    check_float(op, "bias", *options.bias);
    check_shape(op, "bias", *options.bias, {s.n});
  }
  check_gelu_out(op, c, options.gelu_out);
  if (options.bias_grad != nullptr) {
    fail(op, "bias_grad", *options.bias_grad,
         "is not computed from quantized operands; call bias_backward on the unquantized "
         "output gradient");
  }
  return s;
}

void check_matmul(const char* op, const Tensor& c, const Tensor& a, const Tensor& b,
                  const MatmulOptions& options) {
  const std::string at = std::string(op) + ": ";
  check_float(op, "a", a);
  check_float(op, "b", b);
  check_float(op, "c", c);
  MIXTRAIN_CHECK_ARG(c.ndim() == 2 || c.ndim() == 3,
                     at + "c " + c.describe() + " must be 2-D (M,N) or 3-D (batch,M,N)");
  MIXTRAIN_CHECK_ARG(a.ndim() == c.ndim() && b.ndim() == c.ndim(),
                     at + "a " + a.describe() + ", b " + b.describe() + " and c " + c.describe() +
                         " must all be 2-D or all 3-D");
  MIXTRAIN_CHECK_ARG(a.dtype() == b.dtype(),
                     at + "a " + a.describe() + " and b " + b.describe() + " must share one dtype");
  const auto overlaps = [](const Tensor& x, const Tensor& y) {
    const char* x0 = static_cast<const char*>(x.data());
    const char* y0 = static_cast<const char*>(y.data());
    return x0 < y0 + y.nbytes() && y0 < x0 + x.nbytes();
  };
  MIXTRAIN_CHECK_ARG(!overlaps(c, a) && !overlaps(c, b),
                     at + "c " + c.describe() + " overlaps an input");
  if (c.ndim() == 3) {
    MIXTRAIN_CHECK_ARG(a.dim(0) == c.dim(0) && b.dim(0) == c.dim(0),
                       at + "batch sizes differ: a " + a.describe() + ", b " + b.describe() +
                           ", c " + c.describe());
  }
  const int64_t m = c.dim(-2), n = c.dim(-1);
  const int64_t a_rows = options.trans_a ? a.dim(-1) : a.dim(-2);
  const int64_t k = options.trans_a ? a.dim(-2) : a.dim(-1);
  const int64_t b_rows = options.trans_b ? b.dim(-1) : b.dim(-2);
  const int64_t b_cols = options.trans_b ? b.dim(-2) : b.dim(-1);
  MIXTRAIN_CHECK_ARG(a_rows == m, at + "op(a) of a " + a.describe() + " is " +
                                      shape_string({a_rows, k}) + " but c " + c.describe() +
                                      " has " + std::to_string(m) + " rows");
  MIXTRAIN_CHECK_ARG(b_rows == k, at + "inner dimensions differ: op(a) of a " + a.describe() +
                                      " is " + shape_string({a_rows, k}) + ", op(b) of b " +
                                      b.describe() + " is " + shape_string({b_rows, b_cols}));
  MIXTRAIN_CHECK_ARG(b_cols == n, at + "op(b) of b " + b.describe() + " is " +
                                      shape_string({b_rows, b_cols}) + " but c " + c.describe() +
                                      " has " + std::to_string(n) + " columns");
  if (options.bias != nullptr) {
    const Tensor& bias = *options.bias;
    check_shape(op, "bias", bias, {n});
    MIXTRAIN_CHECK_ARG(
        bias.dtype() == DType::kF32 || bias.dtype() == c.dtype(),
        at + "bias " + bias.describe() + " must be fp32 or c's dtype (c " + c.describe() + ")");
    MIXTRAIN_CHECK_ARG(!overlaps(c, bias), at + "c " + c.describe() + " overlaps the bias");
  }
  check_gelu_out(op, c, options.gelu_out);
  check_bias_grad(op, a, options.trans_a, options.bias_grad);
}

RowShape row_shape(const Tensor& inp) {
  const int64_t channels = inp.dim(-1);
  return {channels == 0 ? 0 : inp.numel() / channels, channels};
}

AttentionShape attention_shape(const Tensor& qkv, int n_head) {
  const int64_t channels = qkv.dim(2) / 3;
  return {qkv.dim(0), qkv.dim(1), channels, n_head, channels / n_head};
}

int64_t checked_classes(const char* op, int64_t classes, int64_t columns) {
  if (classes == 0) return columns;
  if (classes < 0 || classes > columns) {
    throw EngineError(ErrorCode::kInvalidArgument,
                      std::string(op) + ": classes " + std::to_string(classes) +
                          " must be 0 (all) or between 1 and the logits' " +
                          std::to_string(columns) + " columns");
  }
  return classes;
}

void check_ids(const char* op, const char* name, const Tensor& ids, int64_t limit,
               const char* limit_name) {
  check_defined(op, name, ids);
  check_dtype(op, name, ids, DType::kI32);
  const int32_t* values = ids.data_as<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (values[i] < 0 || values[i] >= limit) {
      fail(op, name, ids,
           "holds " + std::to_string(values[i]) + " at index " + std::to_string(i) +
               ", outside [0, " + std::to_string(limit) + "): the " + limit_name + " is " +
               std::to_string(limit));
    }
  }
}

}  // namespace mixtrain::op_checks
