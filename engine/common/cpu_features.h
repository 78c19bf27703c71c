// Why: one binary runs on any x86-64 machine, so wider instruction sets are
// chosen at run time. Hand-written intrinsic paths ask cpu_features();
// plain loops get per-ISA clones through MIXTRAIN_MULTIVERSION, which GCC
// resolves once at load time (ifunc), so no switch sits in a hot loop.
// MIXTRAIN_MAX_CPU_ISA=avx2 (or baseline) caps what cpu_features() reports,
// and so the intrinsic paths and oneDNN's kernels, below what the CPU has:
// the AVX2 paths can then be exercised on an AVX-512 machine at full speed
// (issue 29's heap corruption showed only there). The ifunc clones are
// chosen by the loader and stay those of the real CPU.
#pragma once

#include <string>

namespace mixtrain {

struct CpuFeatures {
  bool avx2 = false;
  bool f16c = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_bf16 = false;
  bool avx512_fp16 = false;
  bool amx_bf16 = false;
  // True when the AVX-512 paths (F + BW + VL) may be used.
  bool has_avx512() const { return avx512f && avx512bw && avx512vl; }
  // e.g. "avx2 f16c fma avx512f avx512bw avx512vl avx512_bf16 amx_bf16".
  std::string describe() const;
};

// The instruction sets a process may use, widest last.
enum class CpuIsa { kBaseline, kAvx2, kAvx512 };

// The features of the CPU this process runs on (detected once, cached),
// less those above MIXTRAIN_MAX_CPU_ISA.
const CpuFeatures& cpu_features();

// MIXTRAIN_MAX_CPU_ISA: avx512 (or unset: no cap), avx2 or baseline. Any
// other value is reported on stderr once and caps nothing.
CpuIsa max_cpu_isa();

}  // namespace mixtrain

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define MIXTRAIN_MULTIVERSION \
  __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define MIXTRAIN_MULTIVERSION
#endif
