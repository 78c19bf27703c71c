// Why: the gradient passes of a mixed-precision step that return values to
// the host: the squared norm for gradient clipping (fp64 accumulation,
// deterministic: per-block partial sums reduced in a fixed order), the
// unscale-and-check of dynamic loss scaling, which must name the first
// tensor (list order) holding an inf or NaN and whether its first
// non-finite element is a NaN, and the magnitude histogram of the
// telemetry (integer counts, so atomics keep it deterministic).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/cuda_dtype.cuh"
#include "engine/backend/cuda/cuda_error.h"
#include "engine/backend/cuda/cuda_kernel_utils.cuh"
#include "engine/backend/cuda/cuda_op_checks.h"
#include "engine/backend/op_checks.h"

namespace mixtrain {
namespace {

// Elements each thread of a sum_squares block covers before the grid
// strides, and the most blocks one tensor gets.
constexpr int64_t kElementsPerThread = 8;
constexpr int64_t kMaxPartialBlocks = 1024;
// "No non-finite element": the value every unscale_and_check slot starts at.
constexpr uint64_t kNoNonFinite = std::numeric_limits<uint64_t>::max();

// partial[blockIdx.x] = sum of x^2 over this block's grid-stride elements.
template <class Ref>
__global__ void sum_squares_partial_kernel(double* partial, Ref x, int64_t n) {
  __shared__ double shared[gpu::kWarpSize];
  double sum = 0.0;
  for (int64_t i = gpu::thread_index(); i < n; i += gpu::grid_size()) {
    const double value = x.load(i);
    sum += value * value;
  }
  sum = gpu::block_sum(sum, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

// *result = sum of partial[0..count), one block, fixed order.
__global__ void sum_partials_kernel(double* result, const double* partial, int64_t count) {
  __shared__ double shared[gpu::kWarpSize];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) sum += partial[i];
  sum = gpu::block_sum(sum, shared);
  if (threadIdx.x == 0) *result = sum;
}

// x *= inv_scale in place (rounded to x's dtype); *first_bad = the lowest
// (2 * index + is_nan) over elements that are inf or NaN afterwards, so the
// minimum names the first non-finite element and says whether it is NaN.
// Without kUnscale (inv_scale 1, which changes no value) it only reads:
// half the memory traffic, which is all this kernel costs.
template <bool kUnscale, class Ref>
__global__ void unscale_and_check_kernel(Ref x, float inv_scale, int64_t n,
                                         unsigned long long* first_bad) {
  for (int64_t i = gpu::thread_index(); i < n; i += gpu::grid_size()) {
    if constexpr (kUnscale) x.store(i, x.load(i) * inv_scale);
    const float stored = x.load(i);
    if (!isfinite(stored)) {
      atomicMin(first_bad,
                static_cast<unsigned long long>(2 * i + (isnan(stored) ? 1 : 0)));
    }
  }
}

// The magnitude histogram's counters on the device: the buckets, then
// zeros, subnormals and non-finite, and amax as |x| bits.
// (unsigned long long: the type CUDA's 64-bit atomicAdd takes.)
using Counter = unsigned long long;
struct DeviceHistogram {
  static constexpr int kSlots = MagnitudeHistogram::kBuckets + 3;
  Counter counts[kSlots];
  unsigned int amax_bits;
};

// magnitude_bucket() of numerics/magnitude_histogram.cc for |x| bits of a
// nonzero finite value.
__device__ inline int histogram_bucket(unsigned int magnitude) {
  const int field = static_cast<int>(magnitude >> 23);
  if (field == 0) return 0;
  const int ceiling = field - 127 + ((magnitude & 0x7fffffu) != 0 ? 1 : 0);
  return min(max(ceiling, MagnitudeHistogram::kMinLog2), MagnitudeHistogram::kMaxLog2) -
         MagnitudeHistogram::kMinLog2;
}

// Counts x into the block's shared counters, then adds them to *out.
template <class Ref>
__global__ void magnitude_histogram_kernel(Ref x, int64_t n, unsigned int smallest_normal_bits,
                                           DeviceHistogram* out) {
  __shared__ Counter counts[DeviceHistogram::kSlots];
  for (int i = threadIdx.x; i < DeviceHistogram::kSlots; i += blockDim.x) counts[i] = 0;
  __syncthreads();
  unsigned int amax_bits = 0;
  constexpr int kZeros = MagnitudeHistogram::kBuckets;
  for (int64_t i = gpu::thread_index(); i < n; i += gpu::grid_size()) {
    const unsigned int magnitude = __float_as_uint(x.load(i)) & 0x7fffffffu;
    if (magnitude == 0) {
      atomicAdd(&counts[kZeros], 1ull);
    } else if (magnitude >= 0x7f800000u) {
      atomicAdd(&counts[kZeros + 2], 1ull);
    } else {
      atomicAdd(&counts[histogram_bucket(magnitude)], 1ull);
      if (magnitude < smallest_normal_bits) atomicAdd(&counts[kZeros + 1], 1ull);
      amax_bits = max(amax_bits, magnitude);
    }
  }
  atomicMax(&out->amax_bits, amax_bits);
  __syncthreads();
  for (int i = threadIdx.x; i < DeviceHistogram::kSlots; i += blockDim.x) {
    if (counts[i] != 0) atomicAdd(&out->counts[i], counts[i]);
  }
}

}  // namespace

double CudaBackend::do_sum_squares(std::span<const Tensor> tensors) {
  const cudaStream_t stream = begin_op();
  std::vector<int64_t> blocks;
  int64_t total_blocks = 0;
  for (const Tensor& t : tensors) {
    const int64_t b =
        t.numel() == 0
            ? 0
            : std::min(kMaxPartialBlocks,
                       (t.numel() + gpu::kBlockThreads * kElementsPerThread - 1) /
                           (gpu::kBlockThreads * kElementsPerThread));
    blocks.push_back(b);
    total_blocks += b;
  }
  if (total_blocks == 0) return 0.0;
  const std::vector<Tensor> buffers =
      scratch({ScratchRequest::raw_bytes(static_cast<size_t>(total_blocks) * sizeof(double)),
               ScratchRequest::raw_bytes(sizeof(double))});
  auto* partial = static_cast<double*>(buffers[0].data());
  auto* result = static_cast<double*>(buffers[1].data());
  int64_t offset = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    if (blocks[k] == 0) continue;
    const Tensor& t = tensors[k];
    gpu::dispatch_compute({&t}, "sum_squares", [&](auto policy) {
      using P = decltype(policy);
      sum_squares_partial_kernel<<<static_cast<unsigned>(blocks[k]), gpu::kBlockThreads, 0,
                                   stream>>>(partial + offset, P::ref(t), t.numel());
      MIXTRAIN_CUDA_CHECK_LAUNCH("sum_squares_partial_kernel");
    });
    offset += blocks[k];
  }
  sum_partials_kernel<<<1, 1024, 0, stream>>>(result, partial, total_blocks);
  MIXTRAIN_CUDA_CHECK_LAUNCH("sum_partials_kernel");
  double host_result = 0.0;
  MIXTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(&host_result, result, sizeof(double), cudaMemcpyDeviceToHost, stream));
  MIXTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host_result;
}

NonFiniteCheck CudaBackend::do_unscale_and_check(std::span<const Tensor> tensors, float inv_scale) {
  const cudaStream_t stream = begin_op();
  NonFiniteCheck check;
  if (tensors.empty()) return check;
  const int64_t count = static_cast<int64_t>(tensors.size());
  const Tensor slots_tensor =
      scratch({ScratchRequest::raw_bytes(static_cast<size_t>(count) * sizeof(uint64_t))})[0];
  auto* slots = static_cast<unsigned long long*>(slots_tensor.data());
  // Every byte 0xFF: each slot starts at kNoNonFinite.
  MIXTRAIN_CUDA_CHECK(
      cudaMemsetAsync(slots, 0xFF, static_cast<size_t>(count) * sizeof(uint64_t), stream));
  for (int64_t k = 0; k < count; ++k) {
    const Tensor& t = tensors[k];
    if (t.numel() == 0) continue;
    gpu::dispatch_compute({&t}, "unscale_and_check", [&](auto policy) {
      using P = decltype(policy);
      const unsigned blocks = gpu::grid_blocks(t.numel());
      if (inv_scale == 1.0f) {
        unscale_and_check_kernel<false><<<blocks, gpu::kBlockThreads, 0, stream>>>(
            P::ref(t), inv_scale, t.numel(), slots + k);
      } else {
        unscale_and_check_kernel<true><<<blocks, gpu::kBlockThreads, 0, stream>>>(
            P::ref(t), inv_scale, t.numel(), slots + k);
      }
      MIXTRAIN_CUDA_CHECK_LAUNCH("unscale_and_check_kernel");
    });
  }
  std::vector<uint64_t> host_slots(static_cast<size_t>(count));
  MIXTRAIN_CUDA_CHECK(cudaMemcpyAsync(host_slots.data(), slots, host_slots.size() * sizeof(uint64_t),
                                      cudaMemcpyDeviceToHost, stream));
  MIXTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int64_t k = 0; k < count; ++k) {
    if (host_slots[k] == kNoNonFinite) continue;
    check.found = true;
    check.tensor_index = static_cast<int>(k);
    check.is_nan = (host_slots[k] & 1u) != 0;
    break;
  }
  return check;
}

MagnitudeHistogram CudaBackend::do_magnitude_histogram(std::span<const Tensor> tensors) {
  const cudaStream_t stream = begin_op();
  MagnitudeHistogram histogram;
  if (tensors.empty()) return histogram;
  const Tensor buffer = scratch({ScratchRequest::raw_bytes(sizeof(DeviceHistogram))})[0];
  auto* device = static_cast<DeviceHistogram*>(buffer.data());
  MIXTRAIN_CUDA_CHECK(cudaMemsetAsync(device, 0, sizeof(DeviceHistogram), stream));
  for (const Tensor& t : tensors) {
    if (t.numel() == 0) continue;
    const unsigned blocks = gpu::grid_blocks(t.numel());
    if (is_fp8(t.dtype())) {
      // fp32 bits of the format's smallest normal: 2^-6 (E4M3), 2^-14 (E5M2).
      const unsigned int smallest_normal = t.dtype() == DType::kFP8E4M3 ? 0x3c800000u : 0x38800000u;
      gpu::dispatch_fp8(t.dtype(), [&](auto fp8_tag) {
        using Fp8 = decltype(fp8_tag);
        magnitude_histogram_kernel<<<blocks, gpu::kBlockThreads, 0, stream>>>(
            gpu::Typed<const Fp8>{static_cast<const Fp8*>(t.data())}, t.numel(), smallest_normal,
            device);
        MIXTRAIN_CUDA_CHECK_LAUNCH("magnitude_histogram_kernel");
      });
      continue;
    }
    // fp32 bits of the tensor's smallest normal: 2^-14 for fp16, else 2^-126.
    const unsigned int smallest_normal = t.dtype() == DType::kF16 ? 0x38800000u : 0x00800000u;
    gpu::dispatch_compute({&t}, "magnitude_histogram", [&](auto policy) {
      using P = decltype(policy);
      magnitude_histogram_kernel<<<blocks, gpu::kBlockThreads, 0, stream>>>(
          P::ref(t), t.numel(), smallest_normal, device);
      MIXTRAIN_CUDA_CHECK_LAUNCH("magnitude_histogram_kernel");
    });
  }
  DeviceHistogram host{};
  MIXTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(&host, device, sizeof(DeviceHistogram), cudaMemcpyDeviceToHost, stream));
  MIXTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int i = 0; i < MagnitudeHistogram::kBuckets; ++i)
    histogram.buckets[static_cast<size_t>(i)] = static_cast<int64_t>(host.counts[i]);
  histogram.zeros = static_cast<int64_t>(host.counts[MagnitudeHistogram::kBuckets]);
  histogram.subnormals = static_cast<int64_t>(host.counts[MagnitudeHistogram::kBuckets + 1]);
  histogram.nonfinite = static_cast<int64_t>(host.counts[MagnitudeHistogram::kBuckets + 2]);
  std::memcpy(&histogram.amax, &host.amax_bits, sizeof histogram.amax);
  return histogram;
}

}  // namespace mixtrain
