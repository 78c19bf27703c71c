// Why: the elementwise ops with no layer of their own: cast (every pair of
// fp32/fp16/bf16/fp8 through CUDA's conversion intrinsics, so results match
// the CPU scalars bit for bit), fill and the residual add. set_zero is a
// cudaMemsetAsync in cuda_backend.cc.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_dtype.cuh"
#include "backend/cuda/cuda_error.h"
#include "backend/cuda/cuda_kernel_utils.cuh"
#include "backend/cuda/cuda_op_checks.h"
#include "backend/op_checks.h"

namespace mixtrain {
namespace {

using gpu::from_f32;
using gpu::grid_size;
using gpu::thread_index;
using gpu::to_f32;

// dst[i] = src[i] converted. Every conversion to fp32 is exact, so going
// through fp32 rounds once, like a direct conversion. dst may be src (same
// element size): each element is read before it is written.
template <class Dst, class Src>
__global__ void cast_kernel(Dst* dst, const Src* src, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += grid_size()) {
    dst[i] = from_f32<Dst>(to_f32(src[i]));
  }
}

template <class Ref> __global__ void fill_kernel(Ref t, float value, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += grid_size()) t.store(i, value);
}

// out may alias a or b: each element is read before it is written.
template <class Ref> __global__ void add_kernel(Ref out, Ref a, Ref b, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += grid_size()) out.store(i, a.load(i) + b.load(i));
}

}  // namespace

void CudaBackend::cast(const Tensor& dst, const Tensor& src) {
  const cudaStream_t stream = begin_op();
  for (const Tensor* t : {&dst, &src}) {
    MIXTRAIN_CHECK_ARG(t->dtype() != DType::kI32,
              "cast: " + t->describe() +
                  " is not a float format (fp32, fp16, bf16, fp8_e4m3, fp8_e5m2)");
  }
  op_checks::check_numel("cast", "dst", dst, src.numel());
  op_checks::check_same_or_disjoint("cast", "dst", dst, "src", src);
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
      cast_kernel<Dst, Src><<<gpu::grid_blocks(n), gpu::kBlockThreads, 0, stream>>>(
          static_cast<Dst*>(dst.data()), static_cast<const Src*>(src.data()), n);
      MIXTRAIN_CUDA_CHECK_LAUNCH("cast_kernel");
    });
  });
}

void CudaBackend::fill(const Tensor& t, float value) {
  const cudaStream_t stream = begin_op();
  const int64_t n = t.numel();
  gpu::dispatch_compute({&t}, "fill", [&](auto policy) {
    using P = decltype(policy);
    if (n == 0) return;
    fill_kernel<<<gpu::grid_blocks(n), gpu::kBlockThreads, 0, stream>>>(P::ref(t), value, n);
    MIXTRAIN_CUDA_CHECK_LAUNCH("fill_kernel");
  });
}

void CudaBackend::add(const Tensor& out, const Tensor& a, const Tensor& b) {
  const cudaStream_t stream = begin_op();
  op_checks::check_numel("add", "b", b, a.numel());
  op_checks::check_numel("add", "out", out, a.numel());
  op_checks::check_same_or_disjoint("add", "out", out, "a", a);
  op_checks::check_same_or_disjoint("add", "out", out, "b", b);
  const int64_t n = a.numel();
  gpu::dispatch_compute({&out, &a, &b}, "add", [&](auto policy) {
    using P = decltype(policy);
    if (n == 0) return;
    add_kernel<<<gpu::grid_blocks(n), gpu::kBlockThreads, 0, stream>>>(P::ref(out), P::ref(a),
                                                                       P::ref(b), n);
    MIXTRAIN_CUDA_CHECK_LAUNCH("add_kernel");
  });
}

}  // namespace mixtrain
