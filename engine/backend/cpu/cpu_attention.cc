// Why: causal multi-head self-attention on the CPU, forward and backward
// side by side. The heads are split out of qkv (B,T,3C) into contiguous
// (B*NH,T,HS) workspace tensors so that every product is one batched GEMM
// (CpuGemm: oneDNN, AMX/AVX512-BF16 for bf16); the causal softmax and its
// backward are OpenMP loops over rows in fp32. The full (T,T) products are
// computed and the masked half zeroed, which costs less than per-row GEMMs.
//
// Per head, with P = att, scale = 1/sqrt(HS):
//   forward:  S = scale Q K^T;  P = causal_softmax(S);  Y = P V
//   backward: dP = dY V^T;  dV = P^T dY;  dS = P (dP - rowsum(P dP));
//             dQ = scale dS K;  dK = scale dS^T Q
//
// GEMM operands are kept in bf16 when qkv is bf16 (the native oneDNN path)
// and in fp32 otherwise (fp16 GEMMs run in fp32 anyway, so the split
// converts once). Products land in fp32 workspace. The per-element loops
// only ever convert fp32 and bf16 (a shift); fp16 tensors pass through one
// bulk convert() each, whose vector paths beat fp16's scalar conversion.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/cpu_gemm.h"
#include "engine/backend/cpu/cpu_math.h"
#include "engine/backend/op_checks.h"
#include "engine/common/cpu_features.h"
#include "engine/numerics/convert.h"

namespace mixtrain {
namespace {

using op_checks::AttentionShape;

// dtype of the GEMM operands (see the top of the file).
DType operand_dtype(DType qkv) { return qkv == DType::kBF16 ? DType::kBF16 : DType::kF32; }

// One row of `parts` * C elements split by head: dst[part][b][h][t][:] =
// src[b][t][part * C + h * HS + :].
template <class TSrc, class TDst>
MIXTRAIN_MULTIVERSION void split_row(const TSrc* src, TDst* dst, const AttentionShape& d, int parts,
                                     int64_t b, int64_t t) {
  const TSrc* row = src + (b * d.seq + t) * parts * d.channels;
  for (int part = 0; part < parts; ++part) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const TSrc* from = row + part * d.channels + h * d.head_size;
      TDst* to = dst + (((part * d.batch + b) * d.heads + h) * d.seq + t) * d.head_size;
      for (int64_t i = 0; i < d.head_size; ++i) to[i] = from_float<TDst>(to_float(from[i]));
    }
  }
}

// The inverse of split_row from fp32, assigning or adding into dst.
template <class TDst>
MIXTRAIN_MULTIVERSION void merge_row(const float* src, TDst* dst, const AttentionShape& d,
                                     int parts, int64_t b, int64_t t, bool accumulate) {
  TDst* row = dst + (b * d.seq + t) * parts * d.channels;
  for (int part = 0; part < parts; ++part) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const float* from = src + (((part * d.batch + b) * d.heads + h) * d.seq + t) * d.head_size;
      TDst* to = row + part * d.channels + h * d.head_size;
      for (int64_t i = 0; i < d.head_size; ++i) {
        to[i] = from_float<TDst>(accumulate ? to_float(to[i]) + from[i] : from[i]);
      }
    }
  }
}

// A workspace copy of `t` in fp32, by one bulk conversion.
Tensor fp32_copy(Backend& backend, const Tensor& t) {
  Tensor out = backend.empty(t.shape(), DType::kF32, MemoryCategory::kWorkspace);
  convert(t.data(), t.dtype(), out.data(), DType::kF32, static_cast<size_t>(t.numel()));
  return out;
}

// src (B,T,parts*C) -> dst (parts,B,NH,T,HS) of dst's dtype (fp32 or bf16).
void split_heads(Backend& backend, const Tensor& src, const Tensor& dst, const AttentionShape& d,
                 int parts) {
  const Tensor source = src.dtype() == DType::kF16 ? fp32_copy(backend, src) : src;
  dispatch_float(source.dtype(), "attention split", [&](auto src_tag) {
    dispatch_float(dst.dtype(), "attention split", [&](auto dst_tag) {
      const auto* from = static_cast<const decltype(src_tag)*>(source.data());
      auto* to = static_cast<decltype(dst_tag)*>(dst.data());
#pragma omp parallel for collapse(2) schedule(static)
      for (int64_t b = 0; b < d.batch; ++b) {
        for (int64_t t = 0; t < d.seq; ++t) split_row(from, to, d, parts, b, t);
      }
    });
  });
}

// src (parts,B,NH,T,HS) fp32 -> dst (B,T,parts*C), assigned or added.
void merge_heads(Backend& backend, const Tensor& src, const Tensor& dst, const AttentionShape& d,
                 int parts, bool accumulate) {
  Tensor target = dst;
  if (dst.dtype() == DType::kF16) {
    target = accumulate ? fp32_copy(backend, dst)
                        : backend.empty(dst.shape(), DType::kF32, MemoryCategory::kWorkspace);
  }
  dispatch_float(target.dtype(), "attention merge", [&](auto dst_tag) {
    const float* from = src.data_as<float>();
    auto* to = static_cast<decltype(dst_tag)*>(target.data());
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < d.batch; ++b) {
      for (int64_t t = 0; t < d.seq; ++t) merge_row(from, to, d, parts, b, t, accumulate);
    }
  });
  if (target.data() != dst.data()) {
    convert(target.data(), DType::kF32, dst.data(), dst.dtype(), static_cast<size_t>(dst.numel()));
  }
}

// The row loops below keep kLanes independent partial results so that they
// vectorize without -ffast-math (which would reorder every sum in the file).
constexpr int64_t kLanes = 16;

// max of x[0, n).
inline float row_max(const float* x, int64_t n) {
  float lanes[kLanes];
  std::fill_n(lanes, kLanes, -std::numeric_limits<float>::infinity());
  int64_t s = 0;
  for (; s + kLanes <= n; s += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] = lanes[l] > x[s + l] ? lanes[l] : x[s + l];
  }
  float result = -std::numeric_limits<float>::infinity();
  for (; s < n; ++s) result = std::max(result, x[s]);
  for (float lane : lanes) result = std::max(result, lane);
  return result;
}

// sum of a[s] * b[s] for s < n (b may be null: sum of a).
template <class TA>
inline float row_dot(const TA* a, const float* b, int64_t n) {
  float lanes[kLanes] = {};
  int64_t s = 0;
  for (; s + kLanes <= n; s += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += to_float(a[s + l]) * (b ? b[s + l] : 1.0f);
  }
  float result = 0.0f;
  for (; s < n; ++s) result += to_float(a[s]) * (b ? b[s] : 1.0f);
  for (float lane : lanes) result += lane;
  return result;
}

// Row t of a causal softmax in place: row[s] = softmax(row[0..t])[s] for
// s <= t, 0 after.
MIXTRAIN_MULTIVERSION void causal_softmax_row(float* row, int64_t t, int64_t seq) {
  const int64_t n = t + 1;
  const float max_score = row_max(row, n);
  for (int64_t s = 0; s < n; ++s) row[s] = cpu_ops::exp_approx(row[s] - max_score);
  const float inv_sum = 1.0f / row_dot(row, nullptr, n);
  for (int64_t s = 0; s < n; ++s) row[s] *= inv_sum;
  std::fill(row + n, row + seq, 0.0f);
}

// Row t of the softmax backward: ds[s] = p[s] (dp[s] - sum_s' p[s'] dp[s'])
// for s <= t, 0 after. ds may alias dp.
template <class TP>
MIXTRAIN_MULTIVERSION void causal_softmax_backward_row(const TP* p, const float* dp, TP* ds,
                                                       int64_t t, int64_t seq) {
  const int64_t n = t + 1;
  const float dot = row_dot(p, dp, n);
  for (int64_t s = 0; s < n; ++s) ds[s] = from_float<TP>(to_float(p[s]) * (dp[s] - dot));
  for (int64_t s = n; s < seq; ++s) ds[s] = from_float<TP>(0.0f);
}

// Rows of T scores (fp32, B*NH*T rows) -> their causal softmax, in place.
void causal_softmax(const Tensor& scores, int64_t seq) {
  const int64_t rows = scores.numel() / seq;
  float* x = scores.data_as<float>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) causal_softmax_row(x + r * seq, r % seq, seq);
}

// ds = softmax backward given probabilities p and dp (fp32); p and ds share
// the operand dtype, and ds may be dp itself when that is fp32.
void causal_softmax_backward(const Tensor& p, const Tensor& dp, const Tensor& ds, int64_t seq) {
  const int64_t rows = p.numel() / seq;
  dispatch_float(p.dtype(), "attention_backward", [&](auto tag) {
    using TP = decltype(tag);
    const TP* probs = p.data_as<TP>();
    const float* g = dp.data_as<float>();
    TP* out = ds.data_as<TP>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      causal_softmax_backward_row(probs + r * seq, g + r * seq, out + r * seq, r % seq, seq);
    }
  });
}

// att as the operand dtype: att itself, or a workspace copy.
Tensor probabilities_as(Backend& backend, const Tensor& att_rows, DType operand_type) {
  if (att_rows.dtype() == operand_type) return att_rows;
  Tensor p = backend.empty(att_rows.shape(), operand_type, MemoryCategory::kWorkspace);
  convert(att_rows.data(), att_rows.dtype(), p.data(), operand_type,
          static_cast<size_t>(att_rows.numel()));
  return p;
}

}  // namespace

void CpuBackend::do_attention_forward(const Tensor& out, const Tensor& att, const Tensor& qkv,
                                      int n_head) {
  const AttentionShape d = op_checks::attention_shape(qkv, n_head);
  const int64_t bh = d.batch * d.heads;
  const Shape head_shape = {bh, d.seq, d.head_size};
  const int64_t head_numel = shape_numel(head_shape);
  constexpr auto kWs = MemoryCategory::kWorkspace;

  const DType operand_type = operand_dtype(qkv.dtype());
  Tensor heads = empty({3, bh, d.seq, d.head_size}, operand_type, kWs);
  split_heads(*this, qkv, heads, d, 3);
  const Tensor q = heads.view(0, head_shape);
  const Tensor k = heads.view(head_numel, head_shape);
  const Tensor v = heads.view(2 * head_numel, head_shape);

  // The scores become the probabilities in place: in att itself when it
  // is fp32, else in workspace converted into att in one pass.
  const Tensor att_rows = att.reshape({bh, d.seq, d.seq});
  const Tensor scores =
      att.dtype() == DType::kF32 ? att_rows : empty(att_rows.shape(), DType::kF32, kWs);
  MatmulOptions scaled_qk;
  scaled_qk.trans_b = true;
  scaled_qk.alpha = 1.0f / std::sqrt(static_cast<float>(d.head_size));
  gemm_->matmul(scores, q, k, scaled_qk);
  causal_softmax(scores, d.seq);
  if (scores.data() != att.data()) {
    convert(scores.data(), DType::kF32, att.data(), att.dtype(), static_cast<size_t>(att.numel()));
  }

  // P as saved (rounded to att's dtype), so that backward sees the same P.
  const Tensor p = probabilities_as(*this, att_rows, operand_type);
  Tensor y = empty({1, bh, d.seq, d.head_size}, DType::kF32, kWs);
  gemm_->matmul(y.reshape(head_shape), p, v, {});
  merge_heads(*this, y, out, d, 1, /*accumulate=*/false);
}

void CpuBackend::do_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                                       const Tensor& att, int n_head) {
  const AttentionShape d = op_checks::attention_shape(qkv, n_head);
  const int64_t bh = d.batch * d.heads;
  const Shape head_shape = {bh, d.seq, d.head_size};
  const int64_t head_numel = shape_numel(head_shape);
  const DType operand_type = operand_dtype(qkv.dtype());
  constexpr auto kWs = MemoryCategory::kWorkspace;

  Tensor heads = empty({3, bh, d.seq, d.head_size}, operand_type, kWs);
  split_heads(*this, qkv, heads, d, 3);
  const Tensor q = heads.view(0, head_shape);
  const Tensor k = heads.view(head_numel, head_shape);
  const Tensor v = heads.view(2 * head_numel, head_shape);
  Tensor dy = empty({1, bh, d.seq, d.head_size}, operand_type, kWs);
  split_heads(*this, dout, dy, d, 1);
  dy = dy.reshape(head_shape);
  const Tensor p = probabilities_as(*this, att.reshape({bh, d.seq, d.seq}), operand_type);

  // dq, dk, dv side by side, in the layout merge_heads reads.
  Tensor dheads = empty({3, bh, d.seq, d.head_size}, DType::kF32, kWs);
  const Tensor dq = dheads.view(0, head_shape);
  const Tensor dk = dheads.view(head_numel, head_shape);
  const Tensor dv = dheads.view(2 * head_numel, head_shape);

  Tensor dp = empty({bh, d.seq, d.seq}, DType::kF32, kWs);
  MatmulOptions transpose_b;
  transpose_b.trans_b = true;
  gemm_->matmul(dp, dy, v, transpose_b);
  MatmulOptions transpose_a;
  transpose_a.trans_a = true;
  gemm_->matmul(dv, p, dy, transpose_a);

  // dS overwrites dP when the operands are fp32.
  Tensor ds = operand_type == DType::kF32 ? dp : empty(dp.shape(), operand_type, kWs);
  causal_softmax_backward(p, dp, ds, d.seq);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.head_size));
  MatmulOptions scaled;
  scaled.alpha = scale;
  gemm_->matmul(dq, ds, k, scaled);
  MatmulOptions scaled_transpose_a;
  scaled_transpose_a.trans_a = true;
  scaled_transpose_a.alpha = scale;
  gemm_->matmul(dk, ds, q, scaled_transpose_a);
  merge_heads(*this, dheads, dqkv, d, 3, /*accumulate=*/true);
}

}  // namespace mixtrain
