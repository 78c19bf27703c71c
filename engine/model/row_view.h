// Why: GEMMs and row-wise ops see a (B,T,K) activation as a (B*T, K)
// matrix; the forward and backward passes share this one spelling of it.
#pragma once

#include "engine/backend/tensor.h"

namespace mixtrain {

// t with its leading dimensions flattened: (B,T,K) -> (B*T, K).
inline Tensor rows(const Tensor& t) { return t.reshape({t.numel() / t.dim(-1), t.dim(-1)}); }

}  // namespace mixtrain
