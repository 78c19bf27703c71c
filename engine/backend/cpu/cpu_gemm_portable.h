// Why: a GEMM that needs nothing but a C++ compiler and OpenMP, for builds
// without oneDNN and for the dtype combinations or CPUs for which oneDNN
// has only its slow reference matmul. Cache-blocked, with the blocks of A
// and B packed into fp32 (converting any of fp32/fp16/bf16 on the way), a
// register-tiled inner kernel compiled per ISA, and fp32 accumulation.
#pragma once

#include <cstddef>

#include "engine/backend/cpu/cpu_gemm_spec.h"

namespace mixtrain {

// Floats of scratch memory portable_gemm needs for `spec` on `threads`
// OpenMP threads.
size_t portable_gemm_workspace_floats(const GemmSpec& spec, int threads);

// Computes `spec` on `operands` with at most `threads` OpenMP threads;
// `workspace` holds portable_gemm_workspace_floats(spec, threads) floats.
// A, B, C and bias may be any of fp32/fp16/bf16, as spec says.
void portable_gemm(const GemmSpec& spec, const GemmOperands& operands, float* workspace,
                   int threads);

}  // namespace mixtrain
