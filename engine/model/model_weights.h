// Why: a model (model.h) reads each parameter and writes each gradient through this
// interface, unit by unit (ParameterLayout units), and says when it starts
// and stops using a unit. A plain trainer hands it two flat buffers
// (FlatModelWeights); ZeRO stage 3 gathers a unit's parameters on acquire and
// frees them on release, and every data-parallel stage starts reducing a
// unit's gradients as soon as backward releases it.
#pragma once

#include <cstddef>

#include "engine/backend/tensor.h"
#include "engine/model/parameter_layout.h"

namespace mixtrain {

enum class ModelPass { kForward, kBackward };

class ModelWeights {
 public:
  virtual ~ModelWeights() = default;
  // Before `pass` first reads unit `unit`'s parameters (or, in backward,
  // adds into its gradients). Units are acquired in the order the pass
  // uses them and each is released once per pass.
  virtual void acquire(size_t /*unit*/, ModelPass /*pass*/) {}
  // After `pass` is done with the unit; in backward, the unit's gradients
  // of this micro-batch are complete.
  virtual void release(size_t /*unit*/, ModelPass /*pass*/) {}
  // The parameter `info` (compute dtype, info.shape), valid while its unit
  // is acquired.
  virtual Tensor param(const ParameterInfo& info) = 0;
  // Its gradient (grad dtype, info.shape), valid while its unit is
  // acquired in backward.
  virtual Tensor grad(const ParameterInfo& info) = 0;
};

// Parameters and gradients as two whole flat buffers in layout order.
class FlatModelWeights final : public ModelWeights {
 public:
  // grads may be undefined for a forward-only use.
  FlatModelWeights(Tensor params, Tensor grads)
      : params_(std::move(params)), grads_(std::move(grads)) {}
  Tensor param(const ParameterInfo& info) override { return parameter_view(params_, info); }
  Tensor grad(const ParameterInfo& info) override { return parameter_view(grads_, info); }

 private:
  Tensor params_;
  Tensor grads_;
};

}  // namespace mixtrain
