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
  // Backend::matmul's contract.
  void matmul(const Tensor& c, const Tensor& a, const Tensor& b, const MatmulOptions& options);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mixtrain
