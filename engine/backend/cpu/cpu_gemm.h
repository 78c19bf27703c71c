// Why: the CPU GEMM behind CpuBackend::matmul (and the batched GEMMs of
// attention): oneDNN matmul primitives cached per shape/dtype/layout when
// oneDNN is present, a portable blocked OpenMP kernel otherwise. fp16
// inputs are converted exactly to fp32 in workspace memory first (oneDNN
// 2.6 has no fp16 matmul on CPU).
#pragma once

#include <memory>

#include "engine/backend/backend.h"

namespace mixtrain {

class CpuGemm {
 public:
  // `backend` allocates the workspace (counted as kWorkspace); it must
  // outlive this object.
  explicit CpuGemm(Backend& backend);
  ~CpuGemm();
  // Backend::matmul's product, on arguments that passed its checks.
  void matmul(const Tensor& c, const Tensor& a, const Tensor& b, const MatmulOptions& options);
  // True when products of `type` inputs and output run on a kernel for
  // that dtype, without fp32 workspace copies of the operands (what the
  // memory planner needs to know of this CPU).
  bool runs_without_staging(DType type);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mixtrain
