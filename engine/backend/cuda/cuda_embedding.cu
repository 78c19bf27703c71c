// Why: the token and position embeddings on the GPU, forward and backward.
// The backward is a scatter-add where many rows may hit the same table row;
// float atomics would make gradients differ from run to run, so the rows
// are first sorted by id (a stable radix sort keeps equal ids in row
// order) and each id's rows are then summed by one block, in row order.
#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/cuda_dtype.cuh"
#include "engine/backend/cuda/cuda_error.h"
#include "engine/backend/cuda/cuda_kernel_utils.cuh"
#include "engine/backend/cuda/cuda_op_checks.h"
#include "engine/backend/op_checks.h"

namespace mixtrain {
namespace {

using gpu::grid_size;
using gpu::thread_index;

// out (N,C) = table[ids] (+ out when accumulating). An id outside [0, V)
// gives a row of NaN: a kernel cannot throw, and NaN makes the bad input
// visible in the loss instead of reading outside the table.
template <class Ref>
__global__ void embedding_forward_kernel(Ref out, const int32_t* ids, Ref table, bool accumulate,
                                         int64_t rows, int64_t channels, int64_t vocab) {
  const int64_t total = rows * channels;
  for (int64_t i = thread_index(); i < total; i += grid_size()) {
    const int64_t id = ids[i / channels];
    float value = id >= 0 && id < vocab ? table.load(id * channels + i % channels) : NAN;
    if (accumulate) value += out.load(i);
    out.store(i, value);
  }
}

__global__ void iota_kernel(int32_t* values, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += grid_size()) values[i] = static_cast<int32_t>(i);
}

// For each run of equal ids in sorted_ids, the block at the run's first
// position adds the run's dout rows (in row order) into dtable[id]. Ids
// outside [0, V) are skipped.
template <class Ref>
__global__ void embedding_backward_kernel(Ref dtable, Ref dout, const int32_t* sorted_ids,
                                          const int32_t* sorted_rows, int64_t rows,
                                          int64_t channels, int64_t vocab) {
  for (int64_t start = blockIdx.x; start < rows; start += gridDim.x) {
    const int32_t id = sorted_ids[start];
    if ((start > 0 && sorted_ids[start - 1] == id) || id < 0 || id >= vocab) continue;
    for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
      float sum = 0.0f;
      for (int64_t p = start; p < rows && sorted_ids[p] == id; ++p) {
        sum += dout.load(static_cast<int64_t>(sorted_rows[p]) * channels + c);
      }
      const int64_t at = static_cast<int64_t>(id) * channels + c;
      dtable.store(at, dtable.load(at) + sum);
    }
  }
}

}  // namespace

void CudaBackend::do_embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table,
                                       bool accumulate) {
  const cudaStream_t stream = begin_op();
  const char* op = "embedding_forward";
  const int64_t rows = ids.numel(), vocab = table.dim(0), channels = table.dim(1);
  gpu::dispatch_compute({&out, &table}, op, [&](auto policy) {
    using P = decltype(policy);
    if (rows * channels == 0) return;
    embedding_forward_kernel<<<gpu::grid_blocks(rows * channels), gpu::kBlockThreads, 0,
                               stream>>>(P::ref(out), ids.data_as<int32_t>(), P::ref(table),
                                         accumulate, rows, channels, vocab);
    MIXTRAIN_CUDA_CHECK_LAUNCH("embedding_forward_kernel");
  });
}

void CudaBackend::do_embedding_backward(const Tensor& dtable, const Tensor& dout,
                                        const Tensor& ids) {
  const cudaStream_t stream = begin_op();
  const char* op = "embedding_backward";
  const int64_t rows = ids.numel(), vocab = dtable.dim(0), channels = dtable.dim(1);
  const int n = gpu::checked_int(op, "rows", rows);
  if (n == 0 || channels == 0) return;

  size_t sort_bytes = 0;
  MIXTRAIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), n, 0,
      static_cast<int>(sizeof(int32_t) * 8), stream));
  const std::vector<Tensor> buffers =
      scratch({{{rows}, DType::kI32},
               {{rows}, DType::kI32},
               {{rows}, DType::kI32},
               ScratchRequest::raw_bytes(sort_bytes)});
  int32_t* sorted_ids = buffers[0].data_as<int32_t>();
  int32_t* row_index = buffers[1].data_as<int32_t>();
  int32_t* sorted_rows = buffers[2].data_as<int32_t>();

  iota_kernel<<<gpu::grid_blocks(rows), gpu::kBlockThreads, 0, stream>>>(row_index, rows);
  MIXTRAIN_CUDA_CHECK_LAUNCH("iota_kernel");
  MIXTRAIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      buffers[3].data(), sort_bytes, ids.data_as<int32_t>(), sorted_ids, row_index, sorted_rows,
      n, 0, static_cast<int>(sizeof(int32_t) * 8), stream));
  gpu::dispatch_compute({&dtable, &dout}, op, [&](auto policy) {
    using P = decltype(policy);
    embedding_backward_kernel<<<gpu::grid_blocks(rows, 1), gpu::kBlockThreads, 0, stream>>>(
        P::ref(dtable), P::ref(dout), sorted_ids, sorted_rows, rows, channels, vocab);
    MIXTRAIN_CUDA_CHECK_LAUNCH("embedding_backward_kernel");
  });
}

}  // namespace mixtrain
