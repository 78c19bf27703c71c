// Why: see cpu_gemm.h. This file checks Backend::matmul's contract once,
// then picks how to run the product. With oneDNN it tries, in order: the
// operands as they are; the output staged in an fp32 workspace (for fp16 C,
// or a dtype mix oneDNN lacks); inputs and output staged in fp32 (fp16
// inputs, or bf16 on a CPU without AVX512-BF16/AMX). Staging is exact for
// inputs (fp16/bf16 -> fp32) and rounds the output once, as a native kernel
// would. When oneDNN has no optimized kernel at all, or is absent, the
// portable kernel runs on the operands directly.
#include "engine/backend/cpu/cpu_gemm.h"

#include <omp.h>

#include <array>
#include <string>

#include "engine/backend/cpu/cpu_gemm_portable.h"
#include "engine/backend/cpu/cpu_gemm_spec.h"
#include "engine/numerics/convert.h"
#ifdef MIXTRAIN_WITH_DNNL
#include "engine/backend/cpu/cpu_gemm_onednn.h"
#endif

namespace mixtrain {
namespace {

bool overlaps(const Tensor& x, const Tensor& y) {
  const char* x0 = static_cast<const char*>(x.data());
  const char* y0 = static_cast<const char*>(y.data());
  return x0 < y0 + y.nbytes() && y0 < x0 + x.nbytes();
}

// Checks Backend::matmul's contract and describes the product.
GemmSpec describe_matmul(const Tensor& c, const Tensor& a, const Tensor& b,
                         const MatmulOptions& options) {
  for (const auto& [name, t] : {std::pair{"a", &a}, std::pair{"b", &b}, std::pair{"c", &c}}) {
    MIXTRAIN_CHECK_ARG(t->defined(), "matmul: " + (std::string(name) + " is undefined"));
    MIXTRAIN_CHECK_ARG(
        t->device_type() == DeviceType::kCpu,
        "matmul: " + (std::string(name) + " " + t->describe() + " is not in CPU memory"));
    MIXTRAIN_CHECK_ARG(
        is_float_compute(t->dtype()),
        "matmul: " + (std::string(name) + " " + t->describe() + " must be fp32, fp16 or bf16"));
  }
  MIXTRAIN_CHECK_ARG(c.ndim() == 2 || c.ndim() == 3,
                     "matmul: " + ("c " + c.describe() + " must be 2-D (M,N) or 3-D (batch,M,N)"));
  MIXTRAIN_CHECK_ARG(a.ndim() == c.ndim() && b.ndim() == c.ndim(),
                     "matmul: " + ("a " + a.describe() + ", b " + b.describe() + " and c " +
                                   c.describe() + " must all be 2-D or all 3-D"));
  MIXTRAIN_CHECK_ARG(a.dtype() == b.dtype(), "matmul: " + ("a " + a.describe() + " and b " +
                                                           b.describe() + " must share one dtype"));
  MIXTRAIN_CHECK_ARG(!overlaps(c, a) && !overlaps(c, b),
                     "matmul: " + ("c " + c.describe() + " overlaps an input"));

  GemmSpec s;
  s.batched = c.ndim() == 3;
  s.batch = s.batched ? c.dim(0) : 1;
  s.m = c.dim(-2);
  s.n = c.dim(-1);
  s.trans_a = options.trans_a;
  s.trans_b = options.trans_b;
  s.k = s.trans_a ? a.dim(-2) : a.dim(-1);
  s.ab_type = a.dtype();
  s.c_type = c.dtype();
  s.alpha = options.alpha;
  s.beta = options.beta;
  if (s.batched) {
    MIXTRAIN_CHECK_ARG(a.dim(0) == s.batch && b.dim(0) == s.batch,
                       "matmul: " + ("batch sizes differ: a " + a.describe() + ", b " +
                                     b.describe() + ", c " + c.describe()));
  }
  const int64_t a_rows = s.trans_a ? a.dim(-1) : a.dim(-2);
  const int64_t b_rows = s.trans_b ? b.dim(-1) : b.dim(-2);
  const int64_t b_cols = s.trans_b ? b.dim(-2) : b.dim(-1);
  MIXTRAIN_CHECK_ARG(
      a_rows == s.m,
      "matmul: " + ("op(a) of a " + a.describe() + " is " + shape_string({a_rows, s.k}) +
                    " but c " + c.describe() + " has " + std::to_string(s.m) + " rows"));
  MIXTRAIN_CHECK_ARG(b_rows == s.k,
                     "matmul: " + ("inner dimensions differ: op(a) of a " + a.describe() + " is " +
                                   shape_string({a_rows, s.k}) + ", op(b) of b " + b.describe() +
                                   " is " + shape_string({b_rows, b_cols})));
  MIXTRAIN_CHECK_ARG(
      b_cols == s.n,
      "matmul: " + ("op(b) of b " + b.describe() + " is " + shape_string({b_rows, b_cols}) +
                    " but c " + c.describe() + " has " + std::to_string(s.n) + " columns"));
  if (options.bias != nullptr) {
    const Tensor& bias = *options.bias;
    MIXTRAIN_CHECK_ARG(bias.defined() && bias.device_type() == DeviceType::kCpu,
                       "matmul: " + (std::string("bias is undefined or not in CPU memory")));
    MIXTRAIN_CHECK_ARG(bias.ndim() == 1 && bias.dim(0) == s.n,
                       "matmul: " + ("bias " + bias.describe() + " must be (" +
                                     std::to_string(s.n) + ") for c " + c.describe()));
    MIXTRAIN_CHECK_ARG(bias.dtype() == DType::kF32 || bias.dtype() == c.dtype(),
                       "matmul: " + ("bias " + bias.describe() + " must be fp32 or c's dtype (c " +
                                     c.describe() + ")"));
    MIXTRAIN_CHECK_ARG(!overlaps(c, bias),
                       "matmul: " + ("c " + c.describe() + " overlaps the bias"));
    s.has_bias = true;
    s.bias_type = bias.dtype();
  }
  return s;
}

}  // namespace

struct CpuGemm::Impl {
  explicit Impl(Backend& backend_in)
      : backend(backend_in)
#ifdef MIXTRAIN_WITH_DNNL
        ,
        onednn(backend_in)
#endif
  {
  }

  // A workspace copy of `t` converted (exactly) to fp32.
  Tensor fp32_copy(const Tensor& t) {
    Tensor out = backend.empty(t.shape(), DType::kF32, MemoryCategory::kWorkspace);
    convert(t.data(), t.dtype(), out.data(), DType::kF32, static_cast<size_t>(t.numel()));
    return out;
  }

#ifdef MIXTRAIN_WITH_DNNL
  // Runs the product through oneDNN, staging operands in fp32 where it has
  // no kernel for their dtypes. False when it has no optimized kernel for
  // any staging (nothing was written then).
  bool run_onednn(const GemmSpec& spec, const Tensor& c, const Tensor& a, const Tensor& b,
                  const Tensor* bias) {
    const GemmSpec* chosen = nullptr;
    std::array<GemmSpec, 3> stagings = {spec, spec, spec};
    for (int level = 0; level < 3 && chosen == nullptr; ++level) {
      GemmSpec& staged = stagings[level];
      if (level >= 1) staged.c_type = DType::kF32;
      if (level >= 2) staged.ab_type = DType::kF32;
      if (staged.bias_type != DType::kF32 && staged.bias_type != staged.c_type) {
        staged.bias_type = DType::kF32;
      }
      if (level > 0 && staged.ab_type == stagings[level - 1].ab_type &&
          staged.c_type == stagings[level - 1].c_type &&
          staged.bias_type == stagings[level - 1].bias_type) {
        continue;  // the same product as the level before
      }
      if (onednn.supports(staged)) chosen = &staged;
    }
    if (chosen == nullptr) return false;

    GemmOperands operands{a.data(), b.data(), c.data(), bias ? bias->data() : nullptr};
    Tensor a32, b32, c32, bias32;  // fp32 staging copies in workspace
    if (chosen->ab_type != spec.ab_type) {
      a32 = fp32_copy(a);
      b32 = fp32_copy(b);
      operands.a = a32.data();
      operands.b = b32.data();
    }
    if (spec.has_bias && chosen->bias_type != spec.bias_type) {
      bias32 = fp32_copy(*bias);
      operands.bias = bias32.data();
    }
    if (chosen->c_type != spec.c_type) {
      c32 = spec.beta != 0.0f ? fp32_copy(c)
                              : backend.empty(c.shape(), DType::kF32, MemoryCategory::kWorkspace);
      operands.c = c32.data();
    }
    onednn.run(*chosen, operands);
    if (c32.defined()) {
      convert(c32.data(), DType::kF32, c.data(), c.dtype(), static_cast<size_t>(c.numel()));
    }
    return true;
  }
#endif

  void run_portable(const GemmSpec& spec, const Tensor& c, const Tensor& a, const Tensor& b,
                    const Tensor* bias) {
    const int threads = omp_get_max_threads();
    Tensor workspace =
        backend.empty({static_cast<int64_t>(portable_gemm_workspace_floats(spec, threads))},
                      DType::kF32, MemoryCategory::kWorkspace);
    portable_gemm(spec, {a.data(), b.data(), c.data(), bias ? bias->data() : nullptr},
                  workspace.data_as<float>(), threads);
  }

  Backend& backend;
#ifdef MIXTRAIN_WITH_DNNL
  OnednnMatmul onednn;
#endif
};

CpuGemm::CpuGemm(Backend& backend) : impl_(std::make_unique<Impl>(backend)) {}

CpuGemm::~CpuGemm() = default;

bool CpuGemm::runs_without_staging(DType type) {
  if (type == DType::kF32) return true;
#ifdef MIXTRAIN_WITH_DNNL
  GemmSpec spec;
  spec.m = spec.n = spec.k = 64;
  spec.ab_type = spec.c_type = type;
  return impl_->onednn.supports(spec);
#else
  return false;
#endif
}

void CpuGemm::matmul(const Tensor& c, const Tensor& a, const Tensor& b,
                     const MatmulOptions& options) {
  const GemmSpec spec = describe_matmul(c, a, b, options);
  if (spec.batch == 0 || spec.m == 0 || spec.n == 0) return;
#ifdef MIXTRAIN_WITH_DNNL
  if (impl_->run_onednn(spec, c, a, b, options.bias)) return;
#endif
  impl_->run_portable(spec, c, a, b, options.bias);
}

}  // namespace mixtrain
