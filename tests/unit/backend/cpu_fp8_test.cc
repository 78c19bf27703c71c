// Why: the CPU backend is the reference every other backend's fp8 ops are
// compared with, so its scaled GEMM is checked here against a double
// product of the operands' values as the definitions give them (code /
// scale per tensor, code * 2^e per MX block), and its refusals name what
// is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend_test_util.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/numerics/mx_scaling.h"

namespace mixtrain::backend_test {
namespace {

// The values of an operand as the definitions give them, on the host.
std::vector<double> operand_values(Backend& backend, const Fp8Operand& op) {
  std::vector<uint8_t> codes(static_cast<size_t>(op.codes.numel()));
  backend.copy_to_host(codes.data(), op.codes);
  const Fp8Format format = fp8_format(op.codes.dtype());
  std::vector<double> values(codes.size());
  if (!op.block_scales.defined()) {
    for (size_t i = 0; i < codes.size(); ++i) values[i] = fp8_to_float(codes[i], format) / op.scale;
    return values;
  }
  std::vector<uint8_t> scales(static_cast<size_t>(op.block_scales.numel()));
  backend.copy_to_host(scales.data(), op.block_scales);
  const int64_t rows = op.codes.dim(0), cols = op.codes.dim(1);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t scale_index = op.block_axis == MxAxis::kAlongRows
                                      ? r * ((cols + 31) / 32) + c / 32
                                      : (r / 32) * cols + c;
      values[static_cast<size_t>(r * cols + c)] =
          fp8_to_float(codes[static_cast<size_t>(r * cols + c)], format) *
          std::ldexp(1.0, scales[static_cast<size_t>(scale_index)] - 127);
    }
  }
  return values;
}

Fp8Operand quantized(Backend& backend, const Tensor& src, DType fp8, float scale,
                     const MxAxis* axis) {
  Fp8Operand op{backend.empty(src.shape(), fp8, MemoryCategory::kWorkspace), scale};
  if (axis == nullptr) {
    backend.quantize_fp8(op.codes, src, scale);
    return op;
  }
  op.block_axis = *axis;
  op.block_scales = backend.empty({mx_scale_count(src.dim(0), src.dim(1), *axis)}, DType::kE8M0,
                                  MemoryCategory::kWorkspace);
  backend.mx_quantize(op.codes, op.block_scales, src, *axis);
  return op;
}

TEST(CpuFp8, ScaledGemmIsTheProductOfTheOperandsValues) {
  CpuBackend backend;
  const int64_t m = 5, k = 70, n = 3;  // 70: MX blocks of 32, 32 and 6
  const Tensor a_src =
      make_tensor(backend, {m, k}, DType::kF32, random_values(m * k, 1, -20.0f, 20.0f));
  const Tensor b_src =
      make_tensor(backend, {n, k}, DType::kBF16, random_values(n * k, 2, -0.01f, 0.01f));
  for (bool mx : {false, true}) {
    SCOPED_TRACE(mx ? "mx" : "per tensor");
    const MxAxis rows = MxAxis::kAlongRows;
    const Fp8Operand a = quantized(backend, a_src, DType::kFP8E4M3, 20.0f, mx ? &rows : nullptr);
    const Fp8Operand b = quantized(backend, b_src, DType::kFP8E5M2, 50000.0f, mx ? &rows : nullptr);
    const Tensor c = backend.empty({m, n}, DType::kF32, MemoryCategory::kActivations);
    MatmulOptions options;
    options.trans_b = true;
    options.alpha = 0.5f;
    backend.matmul_fp8(c, a, b, options);
    const std::vector<double> av = operand_values(backend, a), bv = operand_values(backend, b);
    std::vector<double> want(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t p = 0; p < k; ++p) sum += av[i * k + p] * bv[j * k + p];
        want[static_cast<size_t>(i * n + j)] = 0.5 * sum;
      }
    }
    EXPECT_TRUE(all_close(values_of(backend, c), want, 1e-6));
    // The values are the sources' to within fp8's precision.
    EXPECT_TRUE(all_close(av, values_of(backend, a_src), 1.0 / 16));
  }
}

TEST(CpuFp8, RefusalsNameTheProblem) {
  CpuBackend backend;
  const Tensor src = make_tensor(backend, {4, 64}, DType::kF32, random_values(256, 3));
  const MxAxis rows = MxAxis::kAlongRows;
  const Fp8Operand a = quantized(backend, src, DType::kFP8E4M3, 1.0f, &rows);
  const Tensor c = backend.empty({4, 4}, DType::kF32, MemoryCategory::kActivations);
  // B = src (4, 64) not transposed would need (64, 4): use B^T with blocks
  // along columns, the wrong axis for a transposed B.
  const MxAxis columns = MxAxis::kAlongColumns;
  const Fp8Operand wrong_axis = quantized(backend, src, DType::kFP8E4M3, 1.0f, &columns);
  MatmulOptions options;
  options.trans_b = true;
  EXPECT_THROW(
      {
        try {
          backend.matmul_fp8(c, a, wrong_axis, options);
        } catch (const EngineError& e) {
          EXPECT_NE(std::string(e.what()).find("wrong axis"), std::string::npos) << e.what();
          throw;
        }
      },
      EngineError);
  const Tensor bias_grad = backend.zeros({4}, DType::kF32, MemoryCategory::kActivations);
  MatmulOptions with_bias_grad;
  with_bias_grad.trans_a = true;
  with_bias_grad.bias_grad = &bias_grad;
  const Fp8Operand per_tensor = quantized(backend, src, DType::kFP8E4M3, 1.0f, nullptr);
  EXPECT_THROW(backend.matmul_fp8(c, per_tensor, per_tensor, with_bias_grad), EngineError);
  Fp8Operand zero_scale = per_tensor;
  zero_scale.scale = 0.0f;
  EXPECT_THROW(backend.matmul_fp8(c, zero_scale, per_tensor, options), EngineError);
  const Tensor wrong_scales = backend.empty({3}, DType::kE8M0, MemoryCategory::kWorkspace);
  EXPECT_THROW(backend.mx_quantize(a.codes, wrong_scales, src, rows), EngineError);
  EXPECT_THROW(backend.quantize_fp8(src, src, 1.0f), EngineError);  // codes not fp8
}

}  // namespace
}  // namespace mixtrain::backend_test
