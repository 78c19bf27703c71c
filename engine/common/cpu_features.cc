// Why: runtime CPU detection in one place (see cpu_features.h).
#include "engine/common/cpu_features.h"

#include <cstdlib>
#include <iostream>
#include <string_view>

namespace mixtrain {
namespace {

CpuIsa read_max_cpu_isa() {
  const char* value = std::getenv("MIXTRAIN_MAX_CPU_ISA");
  const std::string_view isa = value == nullptr ? "" : value;
  if (isa.empty() || isa == "avx512") return CpuIsa::kAvx512;
  if (isa == "avx2") return CpuIsa::kAvx2;
  if (isa == "baseline") return CpuIsa::kBaseline;
  std::cerr << "mixtrain: MIXTRAIN_MAX_CPU_ISA=" << isa
            << " is not one of avx512, avx2, baseline; ignored\n";
  return CpuIsa::kAvx512;
}

// `f` less the instruction sets above `isa`.
CpuFeatures capped(CpuFeatures f, CpuIsa isa) {
  if (isa != CpuIsa::kAvx512) {
    f.avx512f = f.avx512bw = f.avx512vl = f.avx512_bf16 = f.avx512_fp16 = f.amx_bf16 = false;
  }
  if (isa == CpuIsa::kBaseline) f.avx2 = f.f16c = f.fma = false;
  return f;
}

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
  // F16C, AVX512-FP16 and AMX are not all known to __builtin_cpu_supports in
  // GCC 12: read CPUID directly (leaf 1 ECX bit 29; leaf 7 EDX bits 23, 22).
  unsigned a, b, c, d;
  __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
  f.f16c = (c >> 29) & 1u;
  __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  f.avx512_fp16 = (d >> 23) & 1u;
  f.amx_bf16 = (d >> 22) & 1u;
#endif
  return f;
}

}  // namespace

std::string CpuFeatures::describe() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(avx2, "avx2");
  add(f16c, "f16c");
  add(fma, "fma");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512_bf16, "avx512_bf16");
  add(avx512_fp16, "avx512_fp16");
  add(amx_bf16, "amx_bf16");
  return s.empty() ? "baseline" : s;
}

CpuIsa max_cpu_isa() {
  static const CpuIsa isa = read_max_cpu_isa();
  return isa;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = capped(detect(), max_cpu_isa());
  return features;
}

}  // namespace mixtrain
