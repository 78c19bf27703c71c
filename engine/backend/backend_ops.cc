// Why: the public ops of Backend, one definition each for every backend.
// Each checks its arguments once, with the messages of op_checks.h, asks
// the backend whether it can run them (supports), and calls the backend's
// do_ implementation, which checks nothing again: a second copy of a check
// in one backend is how the CPU and CUDA came to accept different
// arguments and word the same mistake differently.
#include <string>

#include "engine/backend/backend.h"
#include "engine/backend/op_checks.h"

namespace mixtrain {

using namespace op_checks;

namespace {

// A layernorm's `inp` and the (N,C) rows it makes.
RowShape checked_rows(const char* op, const Tensor& inp) {
  check_float(op, "inp", inp);
  MIXTRAIN_CHECK_ARG(inp.ndim() >= 1,
                     std::string(op) + ": inp " + inp.describe() + " must be (N, C) or (B, T, C)");
  return row_shape(inp);
}

// An fp32 (N) row statistic of a layernorm.
void check_row_stat(const char* op, const char* name, const Tensor& t, int64_t rows) {
  check_dtype(op, name, t, DType::kF32);
  check_numel(op, name, t, rows);
}

// A (C) per-channel float tensor.
void check_channel_vector(const char* op, const char* name, const Tensor& t, int64_t channels) {
  check_float(op, name, t);
  check_numel(op, name, t, channels);
}

// What LayerNorm's and RMSNorm's forward share: inp's rows, out of their
// shape (it may be inp itself), rstd (N) fp32, weight (C).
RowShape check_norm_forward(const char* op, const Tensor& out, const Tensor& rstd,
                            const Tensor& inp, const Tensor& weight) {
  const RowShape shape = checked_rows(op, inp);
  check_float(op, "out", out);
  check_matrix(op, "out", out, shape.rows, shape.channels);
  check_same_or_disjoint(op, "out", out, "inp", inp);
  check_row_stat(op, "rstd", rstd, shape.rows);
  check_channel_vector(op, "weight", weight, shape.channels);
  return shape;
}

// What their backward shares: dinp and dout of inp's rows, weight and
// dweight (C), rstd (N) fp32.
RowShape check_norm_backward(const char* op, const Tensor& dinp, const Tensor& dweight,
                             const Tensor& dout, const Tensor& inp, const Tensor& weight,
                             const Tensor& rstd) {
  const RowShape shape = checked_rows(op, inp);
  check_float(op, "dinp", dinp);
  check_matrix(op, "dinp", dinp, shape.rows, shape.channels);
  check_float(op, "dout", dout);
  check_matrix(op, "dout", dout, shape.rows, shape.channels);
  check_same_or_disjoint(op, "dinp", dinp, "dout", dout);
  check_channel_vector(op, "weight", weight, shape.channels);
  check_channel_vector(op, "dweight", dweight, shape.channels);
  check_row_stat(op, "rstd", rstd, shape.rows);
  return shape;
}

// rope_{forward,backward}'s tensors: `in` (B,T,H,HS) with HS even, `out`
// of its shape (the same tensor or apart), freqs (T', HS/2, 2) fp32 with
// T' >= T.
void check_rope(const char* op, const char* out_name, const Tensor& out, const char* in_name,
                const Tensor& in, const Tensor& freqs) {
  check_float(op, in_name, in);
  MIXTRAIN_CHECK_ARG(in.ndim() == 4 && in.dim(3) % 2 == 0,
                     std::string(op) + ": " + in_name + " " + in.describe() +
                         " must be (B, T, H, HS) with an even head size HS");
  check_float(op, out_name, out);
  check_shape(op, out_name, out, in.shape());
  check_same_or_disjoint(op, out_name, out, in_name, in);
  check_dtype(op, "freqs", freqs, DType::kF32);
  MIXTRAIN_CHECK_ARG(freqs.ndim() == 3 && freqs.dim(0) >= in.dim(1) &&
                         freqs.dim(1) == in.dim(3) / 2 && freqs.dim(2) == 2,
                     std::string(op) + ": freqs " + freqs.describe() + " must be (T', " +
                         std::to_string(in.dim(3) / 2) +
                         ", 2) with T' >= T = " + std::to_string(in.dim(1)));
}

// embedding_{forward,backward}'s tensors: rows (N,C) of activations or
// their gradient, ids (N) int32, table (V,C) or its gradient. The ids'
// values are read only where the backend computes on the host (the CPU),
// where an id outside [0, V) would read or write outside the table; a GPU
// kernel skips such ids, and reading them would wait for the device.
void check_embedding(const Backend& backend, const char* op, const char* rows_name,
                     const Tensor& rows, const Tensor& ids, const char* table_name,
                     const Tensor& table) {
  check_float(op, table_name, table);
  check_float(op, rows_name, rows);
  MIXTRAIN_CHECK_ARG(table.ndim() == 2, std::string(op) + ": " + table_name + " " +
                                            table.describe() + " must be (V, C)");
  check_dtype(op, "ids", ids, DType::kI32);
  check_matrix(op, rows_name, rows, ids.numel(), table.dim(1));
  if (backend.device_type() == DeviceType::kCpu) {
    check_ids(op, "ids", ids, table.dim(0), "vocab size");
  }
}

// attention_{forward,backward}'s qkv and att; the shape they make.
AttentionShape check_attention(const char* op, const Tensor& qkv, const Tensor& att, int n_head) {
  check_float(op, "qkv", qkv);
  MIXTRAIN_CHECK_ARG(qkv.ndim() == 3 && qkv.dim(2) % 3 == 0,
                     std::string(op) + ": qkv " + qkv.describe() + " must be (B,T,3C)");
  const int64_t channels = qkv.dim(2) / 3;
  MIXTRAIN_CHECK_ARG(n_head > 0 && channels % n_head == 0,
                     std::string(op) + ": n_head " + std::to_string(n_head) + " must divide C = " +
                         std::to_string(channels) + " of qkv " + qkv.describe());
  const AttentionShape s = attention_shape(qkv, n_head);
  check_float(op, "att", att);
  check_shape(op, "att", att, {s.batch, s.heads, s.seq, s.seq});
  return s;
}

// Every tensor of a list is of a compute dtype.
void check_float_list(const char* op, std::span<const Tensor> tensors) {
  for (size_t t = 0; t < tensors.size(); ++t) {
    check_float(op, ("tensors[" + std::to_string(t) + "]").c_str(), tensors[t]);
  }
}

}  // namespace

void Backend::require_support(const char* op, BackendOp kind,
                              std::initializer_list<DType> dtypes) const {
  const OpSupport support = supports(kind, std::span<const DType>(dtypes.begin(), dtypes.size()));
  if (!support.supported) {
    throw EngineError(ErrorCode::kInvalidArgument, std::string(op) + ": " + support.reason);
  }
}

void Backend::copy(const Tensor& dst, const Tensor& src, StreamKind stream) {
  constexpr const char* kOp = "copy";
  check_dtype(kOp, "src", src, dst.dtype());
  check_numel(kOp, "src", src, dst.numel());
  do_copy(dst, src, stream);
}

void Backend::cast(const Tensor& dst, const Tensor& src) {
  constexpr const char* kOp = "cast";
  check_float_format(kOp, "dst", dst);
  check_float_format(kOp, "src", src);
  check_numel(kOp, "src", src, dst.numel());
  check_same_or_disjoint(kOp, "dst", dst, "src", src);
  require_support(kOp, BackendOp::kCast, {dst.dtype(), src.dtype()});
  do_cast(dst, src);
}

void Backend::fill(const Tensor& t, float value) {
  check_float("fill", "t", t);
  require_support("fill", BackendOp::kFill, {t.dtype()});
  do_fill(t, value);
}

void Backend::set_zero(const Tensor& t) {
  MIXTRAIN_CHECK_ARG(t.defined(), "set_zero: t is undefined");
  do_set_zero(t);
}

void Backend::add(const Tensor& out, const Tensor& a, const Tensor& b) {
  constexpr const char* kOp = "add";
  check_float(kOp, "out", out);
  check_float(kOp, "a", a);
  check_float(kOp, "b", b);
  check_numel(kOp, "a", a, out.numel());
  check_numel(kOp, "b", b, out.numel());
  check_same_or_disjoint(kOp, "out", out, "a", a);
  check_same_or_disjoint(kOp, "out", out, "b", b);
  require_support(kOp, BackendOp::kAdd, {out.dtype(), a.dtype(), b.dtype()});
  do_add(out, a, b);
}

void Backend::matmul(const Tensor& c, const Tensor& a, const Tensor& b,
                     const MatmulOptions& options) {
  constexpr const char* kOp = "matmul";
  check_matmul(kOp, c, a, b, options);
  require_support(kOp, BackendOp::kMatmul, {a.dtype(), b.dtype(), c.dtype()});
  do_matmul(c, a, b, options);
}

void Backend::bias_backward(const Tensor& dbias, const Tensor& dout) {
  constexpr const char* kOp = "bias_backward";
  check_float(kOp, "dout", dout);
  MIXTRAIN_CHECK_ARG(dout.ndim() >= 1,
                     std::string(kOp) + ": dout " + dout.describe() + " has no columns");
  check_float(kOp, "dbias", dbias);
  check_shape(kOp, "dbias", dbias, {dout.dim(-1)});
  require_support(kOp, BackendOp::kBiasBackward, {dbias.dtype(), dout.dtype()});
  do_bias_backward(dbias, dout);
}

float Backend::amax(const Tensor& src) {
  check_float("amax", "src", src);
  require_support("amax", BackendOp::kAmax, {src.dtype()});
  return do_amax(src);
}

void Backend::quantize_fp8_into(const Tensor& codes, const Tensor& src, float scale,
                                const Tensor& stats, int64_t slot) {
  constexpr const char* kOp = "quantize_fp8";
  check_fp8(kOp, "codes", codes);
  check_float(kOp, "src", src);
  check_numel(kOp, "src", src, codes.numel());
  check_stats_slot(kOp, stats, slot);
  require_support(kOp, BackendOp::kQuantizeFp8, {codes.dtype(), src.dtype()});
  do_quantize_fp8_into(codes, src, scale, stats, slot);
}

int64_t Backend::mx_quantize(const Tensor& codes, const Tensor& block_scales, const Tensor& src,
                             MxAxis axis) {
  constexpr const char* kOp = "mx_quantize";
  check_fp8(kOp, "codes", codes);
  check_float(kOp, "src", src);
  check_block_scales(kOp, codes, block_scales, axis);
  check_shape(kOp, "src", src, codes.shape());
  require_support(kOp, BackendOp::kMxQuantize, {codes.dtype(), src.dtype()});
  return do_mx_quantize(codes, block_scales, src, axis);
}

void Backend::dequantize_fp8(const Tensor& dst, const Fp8Operand& src) {
  constexpr const char* kOp = "dequantize_fp8";
  check_fp8_operand(kOp, "src", src);
  check_float(kOp, "dst", dst);
  check_numel(kOp, "dst", dst, src.codes.numel());
  require_support(kOp, BackendOp::kDequantizeFp8, {dst.dtype(), src.codes.dtype()});
  do_dequantize_fp8(dst, src);
}

void Backend::matmul_fp8(const Tensor& c, const Fp8Operand& a, const Fp8Operand& b,
                         const MatmulOptions& options) {
  constexpr const char* kOp = "matmul_fp8";
  check_matmul_fp8(kOp, c, a, b, options);
  require_support(kOp, BackendOp::kMatmulFp8, {a.codes.dtype(), b.codes.dtype(), c.dtype()});
  do_matmul_fp8(c, a, b, options);
}

void Backend::embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table,
                                bool accumulate) {
  constexpr const char* kOp = "embedding_forward";
  check_embedding(*this, kOp, "out", out, ids, "table", table);
  require_support(kOp, BackendOp::kEmbeddingForward, {out.dtype(), table.dtype()});
  do_embedding_forward(out, ids, table, accumulate);
}

void Backend::embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids) {
  constexpr const char* kOp = "embedding_backward";
  check_embedding(*this, kOp, "dout", dout, ids, "dtable", dtable);
  require_support(kOp, BackendOp::kEmbeddingBackward, {dtable.dtype(), dout.dtype()});
  do_embedding_backward(dtable, dout, ids);
}

void Backend::layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                const Tensor& inp, const Tensor& weight, const Tensor& bias,
                                float eps) {
  constexpr const char* kOp = "layernorm_forward";
  const RowShape shape = check_norm_forward(kOp, out, rstd, inp, weight);
  check_row_stat(kOp, "mean", mean, shape.rows);
  check_channel_vector(kOp, "bias", bias, shape.channels);
  require_support(kOp, BackendOp::kLayernormForward,
                  {out.dtype(), inp.dtype(), weight.dtype(), bias.dtype()});
  do_layernorm_forward(out, mean, rstd, inp, weight, bias, eps);
}

void Backend::layernorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias,
                                 const Tensor& dout, const Tensor& inp, const Tensor& weight,
                                 const Tensor& mean, const Tensor& rstd) {
  constexpr const char* kOp = "layernorm_backward";
  const RowShape shape = check_norm_backward(kOp, dinp, dweight, dout, inp, weight, rstd);
  check_channel_vector(kOp, "dbias", dbias, shape.channels);
  check_row_stat(kOp, "mean", mean, shape.rows);
  require_support(
      kOp, BackendOp::kLayernormBackward,
      {dinp.dtype(), dweight.dtype(), dbias.dtype(), dout.dtype(), inp.dtype(), weight.dtype()});
  do_layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd);
}

void Backend::rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& inp,
                              const Tensor& weight, float eps) {
  constexpr const char* kOp = "rmsnorm_forward";
  check_norm_forward(kOp, out, rstd, inp, weight);
  require_support(kOp, BackendOp::kRmsnormForward, {out.dtype(), inp.dtype(), weight.dtype()});
  do_rmsnorm_forward(out, rstd, inp, weight, eps);
}

void Backend::rmsnorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dout,
                               const Tensor& inp, const Tensor& weight, const Tensor& rstd) {
  constexpr const char* kOp = "rmsnorm_backward";
  check_norm_backward(kOp, dinp, dweight, dout, inp, weight, rstd);
  require_support(kOp, BackendOp::kRmsnormBackward,
                  {dinp.dtype(), dweight.dtype(), dout.dtype(), inp.dtype(), weight.dtype()});
  do_rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd);
}

void Backend::rope_forward(const Tensor& out, const Tensor& inp, const Tensor& freqs) {
  constexpr const char* kOp = "rope_forward";
  check_rope(kOp, "out", out, "inp", inp, freqs);
  require_support(kOp, BackendOp::kRopeForward, {out.dtype(), inp.dtype()});
  do_rope_forward(out, inp, freqs);
}

void Backend::rope_backward(const Tensor& dinp, const Tensor& dout, const Tensor& freqs) {
  constexpr const char* kOp = "rope_backward";
  check_rope(kOp, "dinp", dinp, "dout", dout, freqs);
  require_support(kOp, BackendOp::kRopeBackward, {dinp.dtype(), dout.dtype()});
  do_rope_backward(dinp, dout, freqs);
}

void Backend::gelu_forward(const Tensor& out, const Tensor& inp) {
  constexpr const char* kOp = "gelu_forward";
  check_float(kOp, "out", out);
  check_float(kOp, "inp", inp);
  check_numel(kOp, "inp", inp, out.numel());
  check_same_or_disjoint(kOp, "out", out, "inp", inp);
  require_support(kOp, BackendOp::kGeluForward, {out.dtype(), inp.dtype()});
  do_gelu_forward(out, inp);
}

void Backend::gelu_backward(const Tensor& dinp, const Tensor& dout, const Tensor& inp) {
  constexpr const char* kOp = "gelu_backward";
  check_float(kOp, "dinp", dinp);
  check_float(kOp, "dout", dout);
  check_float(kOp, "inp", inp);
  check_numel(kOp, "dout", dout, dinp.numel());
  check_numel(kOp, "inp", inp, dinp.numel());
  check_same_or_disjoint(kOp, "dinp", dinp, "dout", dout);
  check_same_or_disjoint(kOp, "dinp", dinp, "inp", inp);
  require_support(kOp, BackendOp::kGeluBackward, {dinp.dtype(), dout.dtype(), inp.dtype()});
  do_gelu_backward(dinp, dout, inp);
}

void Backend::attention_forward(const Tensor& out, const Tensor& att, const Tensor& qkv,
                                int n_head) {
  constexpr const char* kOp = "attention_forward";
  const AttentionShape s = check_attention(kOp, qkv, att, n_head);
  check_float(kOp, "out", out);
  check_shape(kOp, "out", out, {s.batch, s.seq, s.channels});
  require_support(kOp, BackendOp::kAttentionForward, {out.dtype(), att.dtype(), qkv.dtype()});
  do_attention_forward(out, att, qkv, n_head);
}

void Backend::attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                                 const Tensor& att, int n_head) {
  constexpr const char* kOp = "attention_backward";
  const AttentionShape s = check_attention(kOp, qkv, att, n_head);
  check_float(kOp, "dqkv", dqkv);
  check_shape(kOp, "dqkv", dqkv, qkv.shape());
  check_float(kOp, "dout", dout);
  check_shape(kOp, "dout", dout, {s.batch, s.seq, s.channels});
  require_support(kOp, BackendOp::kAttentionBackward,
                  {dqkv.dtype(), dout.dtype(), qkv.dtype(), att.dtype()});
  do_attention_backward(dqkv, dout, qkv, att, n_head);
}

void Backend::softmax_cross_entropy(const Tensor& losses, const Tensor* dlogits,
                                    const Tensor& logits, const Tensor& targets, float dloss,
                                    int64_t classes) {
  constexpr const char* kOp = "softmax_cross_entropy";
  check_float(kOp, "logits", logits);
  MIXTRAIN_CHECK_ARG(
      logits.ndim() >= 1 && logits.dim(-1) > 0,
      std::string(kOp) + ": logits " + logits.describe() + " must be (N, V) with V > 0");
  const int64_t vocab = logits.dim(-1);
  const int64_t rows = logits.numel() / vocab;
  check_dtype(kOp, "losses", losses, DType::kF32);
  check_numel(kOp, "losses", losses, rows);
  check_dtype(kOp, "targets", targets, DType::kI32);
  check_numel(kOp, "targets", targets, rows);
  const int64_t used = checked_classes(kOp, classes, vocab);
  // As the embedding's ids (check_embedding): read where the backend is the host.
  if (device_type() == DeviceType::kCpu) {
    check_ids(kOp, "targets", targets, used, used < vocab ? "number of classes" : "vocab size");
  }
  if (dlogits != nullptr) {
    check_float(kOp, "dlogits", *dlogits);
    check_matrix(kOp, "dlogits", *dlogits, rows, vocab);
    check_same_or_disjoint(kOp, "dlogits", *dlogits, "logits", logits);
  }
  require_support(kOp, BackendOp::kSoftmaxCrossEntropy,
                  {logits.dtype(), dlogits != nullptr ? dlogits->dtype() : logits.dtype()});
  do_softmax_cross_entropy(losses, dlogits, logits, targets, dloss, classes);
}

void Backend::adamw_update(const Tensor& master, const Tensor& m, const Tensor& v,
                           const Tensor& grad, const AdamWConfig& config, const Tensor* param_out) {
  constexpr const char* kOp = "adamw_update";
  check_dtype(kOp, "master", master, DType::kF32);
  check_dtype(kOp, "m", m, DType::kF32);
  check_dtype(kOp, "v", v, DType::kF32);
  check_float(kOp, "grad", grad);
  const int64_t numel = master.numel();
  check_numel(kOp, "m", m, numel);
  check_numel(kOp, "v", v, numel);
  check_numel(kOp, "grad", grad, numel);
  if (param_out != nullptr) {
    check_float(kOp, "param_out", *param_out);
    check_numel(kOp, "param_out", *param_out, numel);
    check_same_or_disjoint(kOp, "param_out", *param_out, "master", master);
  }
  MIXTRAIN_CHECK_ARG(config.step >= 1,
                     std::string(kOp) + ": step " + std::to_string(config.step) + " must be >= 1");
  require_support(kOp, BackendOp::kAdamwUpdate,
                  {grad.dtype(), param_out != nullptr ? param_out->dtype() : DType::kF32});
  do_adamw_update(master, m, v, grad, config, param_out);
}

double Backend::sum_squares(std::span<const Tensor> tensors) {
  check_float_list("sum_squares", tensors);
  return do_sum_squares(tensors);
}

MagnitudeHistogram Backend::magnitude_histogram(std::span<const Tensor> tensors) {
  for (const Tensor& t : tensors) check_float_format("magnitude_histogram", "tensor", t);
  return do_magnitude_histogram(tensors);
}

NonFiniteCheck Backend::unscale_and_check(std::span<const Tensor> tensors, float inv_scale) {
  check_float_list("unscale_and_check", tensors);
  return do_unscale_and_check(tensors, inv_scale);
}

}  // namespace mixtrain
