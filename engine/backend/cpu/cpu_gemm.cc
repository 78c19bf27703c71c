// Why: see cpu_gemm.h. This file picks how to run a product (its arguments
// checked by Backend::matmul). With oneDNN it tries, in order: the
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

// The product Backend::matmul asks for (its arguments checked already).
GemmSpec describe_matmul(const Tensor& c, const Tensor& a, const MatmulOptions& options) {
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
  if (options.bias != nullptr) {
    s.has_bias = true;
    s.bias_type = options.bias->dtype();
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
  const GemmSpec spec = describe_matmul(c, a, options);
  if (spec.batch == 0 || spec.m == 0 || spec.n == 0) return;
#ifdef MIXTRAIN_WITH_DNNL
  if (impl_->run_onednn(spec, c, a, b, options.bias)) return;
#endif
  impl_->run_portable(spec, c, a, b, options.bias);
}

}  // namespace mixtrain
