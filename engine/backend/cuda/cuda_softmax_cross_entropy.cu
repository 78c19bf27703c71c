// Why: the language-model loss on the GPU: per row of logits (N,V) the
// cross-entropy of a softmax computed in fp32, fused with its gradient
// (llm.c's fused_classifier) so the (N,V) probabilities never hit memory.
// One block owns one row; dlogits may alias logits because every element
// is read (max and sum passes) before any is overwritten. Columns past
// `classes` (a padded vocabulary) are left out and get a zero gradient.
#include <cuda_runtime.h>

#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/cuda_dtype.cuh"
#include "engine/backend/cuda/cuda_error.h"
#include "engine/backend/cuda/cuda_kernel_utils.cuh"
#include "engine/backend/cuda/cuda_op_checks.h"
#include "engine/backend/op_checks.h"

namespace mixtrain {
namespace {

constexpr int kLossThreads = 512;

// losses[row] = log(sum exp(x - max)) - (x[target] - max) over the row's
// first `classes` of its `vocab` columns; when has_dlogits, dlogits =
// dloss * (softmax(x) - onehot(target)) there and 0 in the padding past
// them. A target outside [0, classes) gives a NaN loss and a gradient
// without the one-hot term.
template <class Ref>
__global__ void softmax_cross_entropy_kernel(float* losses, Ref dlogits, bool has_dlogits,
                                             Ref logits, const int32_t* targets, float dloss,
                                             int64_t vocab, int64_t classes) {
  __shared__ float shared[gpu::kWarpSize];
  const int64_t row = blockIdx.x;
  const int64_t base = row * vocab;
  const int32_t target = targets[row];
  const bool target_valid = target >= 0 && target < classes;

  float local_max = -INFINITY;
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
    local_max = fmaxf(local_max, logits.load(base + j));
  }
  const float row_max = gpu::block_max(local_max, shared);
  float local_sum = 0.0f;
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
    local_sum += expf(logits.load(base + j) - row_max);
  }
  // The target logit is read before the barrier inside block_sum, so no
  // thread has overwritten it yet when dlogits aliases logits.
  const float target_logit = target_valid ? logits.load(base + target) : NAN;
  const float sum = gpu::block_sum(local_sum, shared);
  if (threadIdx.x == 0) losses[row] = logf(sum) - (target_logit - row_max);
  if (!has_dlogits) return;
  const float inv_sum = 1.0f / sum;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    if (j >= classes) {
      dlogits.store(base + j, 0.0f);
      continue;
    }
    const float prob = expf(logits.load(base + j) - row_max) * inv_sum;
    const float onehot = j == target ? 1.0f : 0.0f;
    dlogits.store(base + j, dloss * (prob - onehot));
  }
}

}  // namespace

void CudaBackend::do_softmax_cross_entropy(const Tensor& losses, const Tensor* dlogits,
                                           const Tensor& logits, const Tensor& targets, float dloss,
                                           int64_t classes) {
  const cudaStream_t stream = begin_op();
  const char* op = "softmax_cross_entropy";
  const int64_t vocab = logits.dim(-1), rows = logits.numel() / vocab;
  const int64_t used = op_checks::checked_classes(op, classes, vocab);
  const unsigned blocks = static_cast<unsigned>(gpu::checked_int(op, "rows", rows));
  gpu::dispatch_compute({&logits, dlogits}, op, [&](auto policy) {
    using P = decltype(policy);
    if (rows == 0) return;
    softmax_cross_entropy_kernel<<<blocks, kLossThreads, 0, stream>>>(
        losses.data_as<float>(), dlogits != nullptr ? P::ref(*dlogits) : P::none(),
        dlogits != nullptr, P::ref(logits), targets.data_as<int32_t>(), dloss, vocab, used);
    MIXTRAIN_CUDA_CHECK_LAUNCH("softmax_cross_entropy_kernel");
  });
}

}  // namespace mixtrain
