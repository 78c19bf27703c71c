// Why: see cpu_gemm_onednn.h. Transposes are expressed as strides of the
// memory descriptors (no copies), alpha as the output scale, beta as a sum
// post-op, and the bias as the primitive's bias, except when alpha != 1:
// oneDNN 2.x scales the bias together with the product, so there the bias
// is a binary-add post-op after the scale and the sum. The scratchpad is
// user-managed so that it is allocated through the backend and counted.
// MIXTRAIN_MAX_CPU_ISA caps oneDNN's kernels as it caps ours.
#include "engine/backend/cpu/cpu_gemm_onednn.h"

#include <bit>
#include <dnnl.hpp>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "engine/common/cpu_features.h"

namespace mixtrain {
namespace {

// Applies MIXTRAIN_MAX_CPU_ISA to oneDNN, once, before its first kernel.
// oneDNN refuses a cap once it chose kernels (a DNNL_MAX_CPU_ISA of the
// user's own stays in force then).
void cap_onednn_isa() {
  static std::once_flag once;
  std::call_once(once, [] {
    const CpuIsa isa = max_cpu_isa();
    if (isa == CpuIsa::kAvx512) return;
    dnnl_set_max_cpu_isa(isa == CpuIsa::kAvx2 ? dnnl_cpu_isa_avx2 : dnnl_cpu_isa_sse41);
  });
}

using dnnl::memory;

// Every field of a GemmSpec, compared and hashed as plain bits.
struct SpecKey {
  int64_t batch, m, n, k;
  uint32_t alpha_bits, beta_bits;
  uint8_t ab_type, c_type, bias_type;
  uint8_t flags;  // batched | trans_a << 1 | trans_b << 2 | has_bias << 3

  explicit SpecKey(const GemmSpec& s)
      : batch(s.batch),
        m(s.m),
        n(s.n),
        k(s.k),
        alpha_bits(std::bit_cast<uint32_t>(s.alpha)),
        beta_bits(std::bit_cast<uint32_t>(s.beta)),
        ab_type(static_cast<uint8_t>(s.ab_type)),
        c_type(static_cast<uint8_t>(s.c_type)),
        bias_type(static_cast<uint8_t>(s.has_bias ? s.bias_type : DType::kF32)),
        flags(static_cast<uint8_t>(s.batched | s.trans_a << 1 | s.trans_b << 2 | s.has_bias << 3)) {
  }
  bool operator==(const SpecKey&) const = default;
};

struct SpecKeyHash {
  size_t operator()(const SpecKey& key) const {
    uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001b3ull; };
    mix(static_cast<uint64_t>(key.batch));
    mix(static_cast<uint64_t>(key.m));
    mix(static_cast<uint64_t>(key.n));
    mix(static_cast<uint64_t>(key.k));
    mix(key.alpha_bits | static_cast<uint64_t>(key.beta_bits) << 32);
    mix(key.ab_type | key.c_type << 8 | key.bias_type << 16 | key.flags << 24);
    return static_cast<size_t>(h);
  }
};

memory::data_type onednn_type(DType t) {
  switch (t) {
    case DType::kF32:
      return memory::data_type::f32;
    case DType::kF16:
      return memory::data_type::f16;
    case DType::kBF16:
      return memory::data_type::bf16;
    default:
      break;
  }
  throw EngineError(ErrorCode::kInternal,
                    std::string("matmul: no oneDNN type for ") + dtype_name(t));
}

// A dense (rows, cols) matrix per batch index, stored (cols, rows) when
// `transposed`.
memory::desc matrix_desc(const GemmSpec& s, int64_t rows, int64_t cols, bool transposed,
                         DType type) {
  const int64_t row_stride = transposed ? 1 : cols;
  const int64_t col_stride = transposed ? rows : 1;
  if (s.batched) {
    return memory::desc({s.batch, rows, cols}, onednn_type(type),
                        {rows * cols, row_stride, col_stride});
  }
  return memory::desc({rows, cols}, onednn_type(type), {row_stride, col_stride});
}

// The bias as a (1, n) row, broadcast over rows (and batches).
memory::desc bias_desc(const GemmSpec& s) {
  if (s.batched) return memory::desc({1, 1, s.n}, onednn_type(s.bias_type), {s.n, s.n, 1});
  return memory::desc({1, s.n}, onednn_type(s.bias_type), {s.n, 1});
}

// One cached product. `primitive` is empty when oneDNN has no optimized
// implementation for it.
struct Entry {
  dnnl::matmul primitive;
  size_t scratchpad_bytes = 0;
  memory a, b, c, bias, scratchpad;
  std::unordered_map<int, memory> args;  // the memories above by argument index
};

}  // namespace

struct OnednnMatmul::Cache {
  // Distinct products seen; past this many the cache starts over, so a
  // caller sweeping shapes cannot grow it without bound.
  static constexpr size_t kMaxEntries = 4096;

  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::mutex mu;
  std::unordered_map<SpecKey, Entry, SpecKeyHash> entries;  // GUARDED_BY(mu)

  // The entry for `s`, created on first use. Requires mu held.
  Entry& find_or_create(const GemmSpec& s) {
    const SpecKey key(s);
    if (auto it = entries.find(key); it != entries.end()) return it->second;
    if (entries.size() >= kMaxEntries) entries.clear();
    return entries.emplace(key, create(s)).first->second;
  }

  Entry create(const GemmSpec& s) {
    const memory::desc a_md = matrix_desc(s, s.m, s.k, s.trans_a, s.ab_type);
    const memory::desc b_md = matrix_desc(s, s.k, s.n, s.trans_b, s.ab_type);
    const memory::desc c_md = matrix_desc(s, s.m, s.n, false, s.c_type);
    const bool bias_as_post_op = s.has_bias && s.alpha != 1.0f;

    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (s.alpha != 1.0f) attr.set_output_scales(0, {s.alpha});
    dnnl::post_ops post_ops;
    if (s.beta != 0.0f) post_ops.append_sum(s.beta);
    if (bias_as_post_op) post_ops.append_binary(dnnl::algorithm::binary_add, bias_desc(s));
    attr.set_post_ops(post_ops);

    const dnnl::matmul::desc desc = s.has_bias && !bias_as_post_op
                                        ? dnnl::matmul::desc(a_md, b_md, bias_desc(s), c_md)
                                        : dnnl::matmul::desc(a_md, b_md, c_md);
    const dnnl::matmul::primitive_desc pd(desc, attr, engine, /*allow_empty=*/true);
    Entry entry;
    if (!pd || std::string_view(pd.impl_info_str()).starts_with("ref")) return entry;

    entry.primitive = dnnl::matmul(pd);
    entry.a = memory(a_md, engine, DNNL_MEMORY_NONE);
    entry.b = memory(b_md, engine, DNNL_MEMORY_NONE);
    entry.c = memory(c_md, engine, DNNL_MEMORY_NONE);
    entry.args = {{DNNL_ARG_SRC, entry.a}, {DNNL_ARG_WEIGHTS, entry.b}, {DNNL_ARG_DST, entry.c}};
    if (s.has_bias) {
      entry.bias = memory(bias_desc(s), engine, DNNL_MEMORY_NONE);
      const int post_op_index = s.beta != 0.0f ? 1 : 0;
      const int bias_arg = bias_as_post_op
                               ? (DNNL_ARG_ATTR_MULTIPLE_POST_OP(post_op_index) | DNNL_ARG_SRC_1)
                               : DNNL_ARG_BIAS;
      entry.args.emplace(bias_arg, entry.bias);
    }
    entry.scratchpad_bytes = pd.scratchpad_desc().get_size();
    if (entry.scratchpad_bytes > 0) {
      entry.scratchpad = memory(pd.scratchpad_desc(), engine, DNNL_MEMORY_NONE);
      entry.args.emplace(DNNL_ARG_SCRATCHPAD, entry.scratchpad);
    }
    return entry;
  }
};

OnednnMatmul::OnednnMatmul(Backend& backend) : backend_(backend) {
  cap_onednn_isa();  // before the cache's engine exists
  cache_ = std::make_unique<Cache>();
}

OnednnMatmul::~OnednnMatmul() = default;

bool OnednnMatmul::supports(const GemmSpec& spec) {
  std::lock_guard lock(cache_->mu);
  try {
    return static_cast<bool>(cache_->find_or_create(spec).primitive);
  } catch (const dnnl::error& e) {
    throw EngineError(ErrorCode::kInternal, std::string("matmul: oneDNN: ") + e.what());
  }
}

void OnednnMatmul::run(const GemmSpec& spec, const GemmOperands& operands) {
  std::lock_guard lock(cache_->mu);
  try {
    Entry& entry = cache_->find_or_create(spec);
    if (!entry.primitive) {
      throw EngineError(ErrorCode::kInternal, "matmul: oneDNN cannot run this product");
    }
    // Raw bytes, counted as workspace; fp32 elements only size them.
    Tensor scratchpad;
    if (entry.scratchpad_bytes > 0) {
      scratchpad = backend_.empty({static_cast<int64_t>((entry.scratchpad_bytes + 3) / 4)},
                                  DType::kF32, MemoryCategory::kWorkspace);
      entry.scratchpad.set_data_handle(scratchpad.data());
    }
    entry.a.set_data_handle(const_cast<void*>(operands.a));
    entry.b.set_data_handle(const_cast<void*>(operands.b));
    entry.c.set_data_handle(operands.c);
    if (spec.has_bias) entry.bias.set_data_handle(const_cast<void*>(operands.bias));
    entry.primitive.execute(cache_->stream, entry.args);
    cache_->stream.wait();
  } catch (const dnnl::error& e) {
    throw EngineError(ErrorCode::kInternal, std::string("matmul: oneDNN: ") + e.what());
  }
}

}  // namespace mixtrain
