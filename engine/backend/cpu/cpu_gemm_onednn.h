// Why: creating a oneDNN matmul primitive costs far more than running a
// small one, and the trainer repeats the same few GEMM shapes every step,
// so each distinct product (shapes, dtypes, transposes, bias, alpha, beta)
// gets its primitive, memory descriptors and memory objects made once and
// kept; the hot path only swaps data pointers and executes. Compiled only
// when oneDNN is present (MIXTRAIN_WITH_DNNL).
#pragma once

#include <memory>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_gemm_spec.h"

namespace mixtrain {

class OnednnMatmul {
 public:
  // `backend` allocates each run's scratchpad (counted as kWorkspace); it
  // must outlive this object.
  explicit OnednnMatmul(Backend& backend);
  ~OnednnMatmul();

  // True when oneDNN has an optimized (JIT, not reference) matmul for
  // `spec` on this CPU. The answer is cached with the primitive.
  bool supports(const GemmSpec& spec);
  // Computes `spec`, which supports() accepted, on `operands`. Thread-safe
  // (runs are serialized; each one uses every core).
  void run(const GemmSpec& spec, const GemmOperands& operands);

 private:
  struct Cache;
  Backend& backend_;
  std::unique_ptr<Cache> cache_;
};

}  // namespace mixtrain
