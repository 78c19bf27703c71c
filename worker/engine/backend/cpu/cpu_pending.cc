// TEMPORARY scaffolding while the CPU ops are written in parallel: each op
// moves out of this file into its own cpu_<layer>.cc; the file is deleted
// when empty. Nothing here may be left in a commit to main.
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_gemm.h"

namespace mixtrain {
namespace {
[[noreturn]] void pending(const char* op) {
  throw EngineError(ErrorCode::kInternal, std::string(op) + ": not written yet");
}
}  // namespace

// --- GEMM helper owns these ---
struct CpuGemm::Impl {};
CpuGemm::CpuGemm(Backend&) {}
CpuGemm::~CpuGemm() = default;
void CpuGemm::matmul(const Tensor&, const Tensor&, const Tensor&, const MatmulOptions&) { pending("matmul"); }
void CpuBackend::matmul(const Tensor&, const Tensor&, const Tensor&, const MatmulOptions&) { pending("matmul"); }
void CpuBackend::bias_backward(const Tensor&, const Tensor&) { pending("bias_backward"); }
void CpuBackend::attention_forward(const Tensor&, const Tensor&, const Tensor&, int) { pending("attention_forward"); }
void CpuBackend::attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int) { pending("attention_backward"); }

// --- ops helper owns these ---
void CpuBackend::cast(const Tensor&, const Tensor&) { pending("cast"); }
void CpuBackend::fill(const Tensor&, float) { pending("fill"); }
void CpuBackend::set_zero(const Tensor&) { pending("set_zero"); }
void CpuBackend::add(const Tensor&, const Tensor&, const Tensor&) { pending("add"); }
void CpuBackend::embedding_forward(const Tensor&, const Tensor&, const Tensor&, bool) { pending("embedding_forward"); }
void CpuBackend::embedding_backward(const Tensor&, const Tensor&, const Tensor&) { pending("embedding_backward"); }
void CpuBackend::layernorm_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, float) { pending("layernorm_forward"); }
void CpuBackend::layernorm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) { pending("layernorm_backward"); }
void CpuBackend::gelu_forward(const Tensor&, const Tensor&) { pending("gelu_forward"); }
void CpuBackend::gelu_backward(const Tensor&, const Tensor&, const Tensor&) { pending("gelu_backward"); }
void CpuBackend::softmax_cross_entropy(const Tensor&, const Tensor*, const Tensor&, const Tensor&, float) { pending("softmax_cross_entropy"); }
void CpuBackend::adamw_update(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const AdamWConfig&, const Tensor*) { pending("adamw_update"); }
double CpuBackend::sum_squares(std::span<const Tensor>) { pending("sum_squares"); }
NonFiniteCheck CpuBackend::unscale_and_check(std::span<const Tensor>, float) { pending("unscale_and_check"); }

}  // namespace mixtrain
