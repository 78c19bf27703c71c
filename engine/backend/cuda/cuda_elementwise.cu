// Why: the elementwise ops with no layer of their own: cast (every pair of
// fp32/fp16/bf16/fp8 through CUDA's conversion intrinsics, so results match
// the CPU scalars bit for bit), fill and the residual add, each with
// 128-bit accesses when its tensors are aligned for them. set_zero is a
// cudaMemsetAsync in cuda_backend.cc.
#include <cuda_runtime.h>

#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/cuda_dtype.cuh"
#include "engine/backend/cuda/cuda_error.h"
#include "engine/backend/cuda/cuda_kernel_utils.cuh"
#include "engine/backend/cuda/cuda_op_checks.h"
#include "engine/backend/op_checks.h"

namespace mixtrain {
namespace {

// dst[i] = src[i] converted, W elements per access. Every conversion to
// fp32 is exact, so going through fp32 rounds once, like a direct
// conversion. dst may be src (same element size): each element is read
// before it is written.
template <int W, class Dst, class Src>
__global__ void cast_kernel(Dst* dst, const Src* src, int64_t n) {
  gpu::for_each_pack<W>(n, [&](int64_t i, auto width) {
    constexpr int K = decltype(width)::value;
    float x[K];
    gpu::load_pack<K>(src, i, x);
    gpu::store_pack<K>(dst, i, x);
  });
}

template <int W, class Ref> __global__ void fill_kernel(Ref t, float value, int64_t n) {
  gpu::for_each_pack<W>(n, [&](int64_t i, auto width) {
    constexpr int K = decltype(width)::value;
    float x[K];
    for (int j = 0; j < K; ++j) x[j] = value;
    t.template store_pack<K>(i, x);
  });
}

// out may alias a or b: each pack is read before it is written.
template <int W, class Ref> __global__ void add_kernel(Ref out, Ref a, Ref b, int64_t n) {
  gpu::for_each_pack<W>(n, [&](int64_t i, auto width) {
    constexpr int K = decltype(width)::value;
    float x[K], y[K];
    a.template load_pack<K>(i, x);
    b.template load_pack<K>(i, y);
    for (int j = 0; j < K; ++j) x[j] += y[j];
    out.template store_pack<K>(i, x);
  });
}

}  // namespace

void CudaBackend::do_cast(const Tensor& dst, const Tensor& src) {
  const cudaStream_t stream = begin_op();
  const int64_t n = src.numel();
  if (n == 0) return;
  if (dst.dtype() == src.dtype()) {
    // A same-type cast is a copy, NaN payloads included.
    if (dst.data() != src.data()) {
      MIXTRAIN_CUDA_CHECK(
          cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDefault, stream));
    }
    return;
  }
  gpu::dispatch_any_float(dst.dtype(), "cast", [&](auto dst_tag) {
    using Dst = decltype(dst_tag);
    gpu::dispatch_any_float(src.dtype(), "cast", [&](auto src_tag) {
      using Src = decltype(src_tag);
      constexpr int kWidth = 16 / (sizeof(Dst) > sizeof(Src) ? sizeof(Dst) : sizeof(Src));
      gpu::dispatch_pack_width<kWidth>({&dst, &src}, [&](auto width) {
        constexpr int W = decltype(width)::value;
        cast_kernel<W, Dst, Src><<<gpu::grid_blocks(n / W), gpu::kBlockThreads, 0, stream>>>(
            static_cast<Dst*>(dst.data()), static_cast<const Src*>(src.data()), n);
        MIXTRAIN_CUDA_CHECK_LAUNCH("cast_kernel");
      });
    });
  });
}

void CudaBackend::do_fill(const Tensor& t, float value) {
  const cudaStream_t stream = begin_op();
  const int64_t n = t.numel();
  gpu::dispatch_compute({&t}, "fill", [&](auto policy) {
    using P = decltype(policy);
    if (n == 0) return;
    gpu::dispatch_pack_width<P::kPackWidth>({&t}, [&](auto width) {
      constexpr int W = decltype(width)::value;
      fill_kernel<W><<<gpu::grid_blocks(n / W), gpu::kBlockThreads, 0, stream>>>(P::ref(t),
                                                                                 value, n);
      MIXTRAIN_CUDA_CHECK_LAUNCH("fill_kernel");
    });
  });
}

void CudaBackend::do_add(const Tensor& out, const Tensor& a, const Tensor& b) {
  const cudaStream_t stream = begin_op();
  const int64_t n = a.numel();
  gpu::dispatch_compute({&out, &a, &b}, "add", [&](auto policy) {
    using P = decltype(policy);
    if (n == 0) return;
    gpu::dispatch_pack_width<P::kPackWidth>({&out, &a, &b}, [&](auto width) {
      constexpr int W = decltype(width)::value;
      add_kernel<W><<<gpu::grid_blocks(n / W), gpu::kBlockThreads, 0, stream>>>(
          P::ref(out), P::ref(a), P::ref(b), n);
      MIXTRAIN_CUDA_CHECK_LAUNCH("add_kernel");
    });
  });
}

}  // namespace mixtrain
