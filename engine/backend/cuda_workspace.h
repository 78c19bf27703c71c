// Why: the CUDA backend's workspace (cuBLAS's, and the scratch buffer its
// ops share) is sized here once: the backend allocates by these functions
// and the memory planner (engine/plan) predicts by them, so the two cannot
// drift apart (issue 32). No CUDA header: the planner runs everywhere.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <vector>

#include "engine/backend/tensor.h"

namespace mixtrain {

// One temporary buffer an op asks the scratch buffer for.
struct ScratchRequest {
  Shape shape;
  DType dtype;
  // Raw memory of at least `bytes` bytes (fp64 partial sums, library
  // workspaces), as an int32 tensor.
  static ScratchRequest raw_bytes(size_t bytes) {
    return {{static_cast<int64_t>((bytes + 3) / 4)}, DType::kI32};
  }
};

// cuBLAS's recommended workspace on a GPU of compute capability
// major * 10 + minor: 32 MiB from Hopper (sm_90) on, 4 MiB before it.
size_t cublas_workspace_bytes(int compute_capability);

// Where each of `requests` starts in the scratch buffer, each on a
// 256-byte boundary (cudaMalloc's own), then the bytes they span.
std::vector<size_t> scratch_offsets(const std::vector<ScratchRequest>& requests);

// The scratch buffer allocated to hold `bytes`: grown in 2 MiB steps.
size_t scratch_buffer_bytes(size_t bytes);

// True when cuBLAS (fp32 compute) can write C of dtype `c` from A and B of
// dtype `ab`: the same dtype, or fp32 from fp16/bf16. An op whose output
// it cannot write accumulates into fp32 scratch and casts.
bool cublas_writes(DType ab, DType c);

// The attention of `heads` heads over (batch, seq, channels).
struct AttentionDims {
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t channels = 0;
  int64_t heads = 0;
};

// The dtype of the score gradient dS and of the GEMMs that read it, for
// GEMM inputs of dtype `gemm`: fp32 for fp16 (dS overflows fp16's range),
// else `gemm`.
DType attention_score_gradient_dtype(DType gemm);

// The scratch attention_forward asks for, in order: the fp32 scores, the
// probabilities in the GEMMs' dtype (qkv's) when `att` holds another, and
// y in fp32 when cuBLAS cannot write `out`'s dtype (empty entries: none).
std::vector<ScratchRequest> attention_forward_scratch(const AttentionDims& dims, DType qkv,
                                                      DType att, DType out);

// The scratch attention_backward asks for, in order: dP (fp32), dS, dout
// and the probabilities cast to the GEMMs' dtype when they hold another,
// dqkv accumulated in fp32 when cuBLAS cannot write it, and q and k in
// dS's dtype when it differs from qkv's.
std::vector<ScratchRequest> attention_backward_scratch(const AttentionDims& dims, DType qkv,
                                                       DType dout, DType att, DType dqkv);

}  // namespace mixtrain
