// Why: the scaled fp8 GEMM every backend shares (backend.h, matmul_fp8):
// the operands' values, exact in bf16, go through the backend's own bf16
// GEMM, so a backend needs only its dequantize op to multiply in fp8.
#include "engine/backend/backend.h"
#include "engine/backend/op_checks.h"

namespace mixtrain {
namespace {

constexpr const char* kOp = "matmul_fp8";

// The operand's values in bf16 workspace: per-tensor codes as they are
// (their 1/scale goes to alpha), MX blocks scaled.
Tensor dequantized(Backend& backend, const Fp8Operand& operand) {
  Tensor values = backend.empty(operand.codes.shape(), DType::kBF16, MemoryCategory::kWorkspace);
  Fp8Operand unscaled = operand;
  if (!operand.block_scales.defined()) unscaled.scale = 1.0f;
  backend.dequantize_fp8(values, unscaled);
  return values;
}

void check_reduction_axis(const char* name, const Fp8Operand& operand, MxAxis reduction) {
  if (operand.block_scales.defined() && operand.block_axis != reduction) {
    throw EngineError(ErrorCode::kInvalidArgument,
                      std::string(kOp) + ": " + name + " " + operand.codes.describe() +
                          " is blocked along the wrong axis: MX blocks must run along the "
                          "GEMM's reduction dimension");
  }
}

}  // namespace

void Backend::matmul_fp8(const Tensor& c, const Fp8Operand& a, const Fp8Operand& b,
                         const MatmulOptions& options) {
  op_checks::check_fp8_operand(kOp, "a", a);
  op_checks::check_fp8_operand(kOp, "b", b);
  check_reduction_axis("a", a, options.trans_a ? MxAxis::kAlongColumns : MxAxis::kAlongRows);
  check_reduction_axis("b", b, options.trans_b ? MxAxis::kAlongRows : MxAxis::kAlongColumns);
  if (options.bias_grad != nullptr) {
    throw EngineError(ErrorCode::kInvalidArgument,
                      std::string(kOp) +
                          ": bias_grad is not computed from quantized operands; call "
                          "bias_backward on the unquantized output gradient");
  }
  MatmulOptions scaled = options;
  if (!a.block_scales.defined()) scaled.alpha *= 1.0f / a.scale;
  if (!b.block_scales.defined()) scaled.alpha *= 1.0f / b.scale;
  matmul(c, dequantized(*this, a), dequantized(*this, b), scaled);
}

}  // namespace mixtrain
