// Why: the scaled fp8 GEMM every backend shares (backend.h, matmul_fp8):
// the operands' values, exact in bf16, go through the backend's own bf16
// GEMM, so a backend needs only its dequantize op to multiply in fp8.
#include "engine/backend/backend.h"

namespace mixtrain {
namespace {

// The operand's values in bf16 workspace: per-tensor codes as they are
// (their 1/scale goes to alpha), MX blocks scaled.
Tensor dequantized(Backend& backend, const Fp8Operand& operand) {
  Tensor values = backend.empty(operand.codes.shape(), DType::kBF16, MemoryCategory::kWorkspace);
  Fp8Operand unscaled = operand;
  if (!operand.block_scales.defined()) unscaled.scale = 1.0f;
  backend.dequantize_fp8(values, unscaled);
  return values;
}

}  // namespace

void Backend::do_matmul_fp8(const Tensor& c, const Fp8Operand& a, const Fp8Operand& b,
                            const MatmulOptions& options) {
  MatmulOptions scaled = options;
  if (!a.block_scales.defined()) scaled.alpha *= 1.0f / a.scale;
  if (!b.block_scales.defined()) scaled.alpha *= 1.0f / b.scale;
  matmul(c, dequantized(*this, a), dequantized(*this, b), scaled);
}

}  // namespace mixtrain
