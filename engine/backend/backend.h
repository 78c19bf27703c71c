// Why: the one interface between the GPT trainer and the hardware, shaped
// like ggml-backend so that the CPU backend and the CUDA backend (device
// memory, streams, events) are siblings behind it. Every op the trainer
// needs, forward and backward, is a method here; dtype dispatch happens
// inside each implementation through dispatch_float().
//
// Conventions for every op:
//  * Tensors are contiguous row-major; shapes are written (B,T,C) with
//    N = B*T rows where an op flattens them.
//  * "compute" tensors may be fp32, bf16 or fp16, each independently of
//    the others unless stated; arithmetic is fp32 (GEMMs accumulate fp32).
//  * Backward ops ADD into every gradient they produce (+=), as llm.c
//    does: the caller zeroes gradients where it wants a fresh sum.
//  * Ops are enqueued on the compute stream. Methods that return a value to
//    the host (sum_squares, unscale_and_check) synchronize it.
//  * Shape or dtype mismatches throw EngineError(kInvalidArgument) naming
//    the op and the tensor. The ops are not virtual: each checks its
//    arguments once for every backend (backend_ops.cc), then calls the
//    backend's do_ implementation (the protected virtuals below).
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend/memory_tracker.h"
#include "engine/backend/tensor.h"
#include "engine/numerics/fp8_scaling.h"
#include "engine/numerics/magnitude_histogram.h"
#include "engine/numerics/mx_scaling.h"

namespace mixtrain {

// Ordered queues of work. On the CPU backend everything is synchronous.
enum class StreamKind { kCompute, kTransfer };

// A point in a stream's work that another stream can wait for.
class Event {
 public:
  virtual ~Event() = default;
  // Blocks the calling thread until the work recorded before the event is done.
  virtual void wait() const = 0;
  // The cudaEvent_t of an event recorded on a CUDA stream, so that another
  // component's stream (NCCL's) can wait for it without blocking a thread;
  // nullptr for events that have none.
  virtual void* native_handle() const { return nullptr; }
};

struct MatmulOptions {
  bool trans_a = false;          // use A^T
  bool trans_b = false;          // use B^T
  const Tensor* bias = nullptr;  // (N), added to every row of C
  float alpha = 1.0f;
  float beta = 0.0f;             // 1 accumulates into C
  // When set (C's shape, disjoint from C): gelu_out = GELU (tanh
  // approximation) of the pre-activation, which C keeps. The CPU applies
  // it to C as stored; CUDA, where the GELU (and the bias) run in the
  // GEMM's epilogue, to the fp32 value before C's rounding.
  const Tensor* gelu_out = nullptr;
  // When set ((M), 2-D product, trans_a: A is stored (K,M)): bias_grad +=
  // the column sums of A as stored, the bias gradient of a linear layer
  // whose output gradient A is. On CUDA it comes out of the GEMM's
  // epilogue (rounded to C's dtype once more before the addition).
  const Tensor* bias_grad = nullptr;
};

struct AdamWConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // decoupled: master *= 1 - lr * weight_decay
  int64_t step = 1;           // 1-based, for bias correction
  float grad_scale = 1.0f;    // gradients are multiplied by this first
};

// An fp8 GEMM operand: codes (fp8_e4m3 or fp8_e5m2) and how they are
// scaled. Per tensor (block_scales undefined): the value is code / scale,
// scale as quantize_fp8 used it. MX (block_scales defined, e8m0): the
// value is code * 2^(s - 127), blocks of 32 along block_axis, which must be
// the GEMM's reduction dimension (see matmul_fp8).
struct Fp8Operand {
  Tensor codes;
  float scale = 1.0f;
  Tensor block_scales;
  MxAxis block_axis = MxAxis::kAlongRows;
};

// 32-bit words in one slot of Backend::fp8_stats_tensor.
inline constexpr int64_t kFp8StatsWords = 4;

// Result of unscale_and_check over a list of tensors.
struct NonFiniteCheck {
  bool found = false;      // some element was inf or NaN after unscaling
  int tensor_index = -1;   // first tensor (list order) that held one
  bool is_nan = false;     // that tensor's first non-finite element was NaN
};

// The ops whose support a backend may deny (Backend::supports).
enum class BackendOp {
  kCast,
  kFill,
  kAdd,
  kMatmul,
  kBiasBackward,
  kAmax,
  kQuantizeFp8,
  kMxQuantize,
  kDequantizeFp8,
  kMatmulFp8,
  kEmbeddingForward,
  kEmbeddingBackward,
  kLayernormForward,
  kLayernormBackward,
  kRmsnormForward,
  kRmsnormBackward,
  kRopeForward,
  kRopeBackward,
  kGeluForward,
  kGeluBackward,
  kAttentionForward,
  kAttentionBackward,
  kSoftmaxCrossEntropy,
  kAdamwUpdate,
};

// What Backend::supports answers: supported, or the reason it is not.
struct OpSupport {
  bool supported = true;
  std::string reason;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "cuda:0".
  virtual std::string name() const = 0;
  virtual DeviceType device_type() const = 0;
  // The device's index among those of its type (the CUDA ordinal); 0 on
  // the CPU.
  virtual int device_index() const = 0;
  // Lets fp32 GEMMs round their inputs to TF32 (CUDA tensor cores, as
  // PyTorch's allow_tf32); off by default. The CPU backend computes fp32
  // GEMMs in fp32 either way.
  virtual void allow_tf32(bool allowed) = 0;
  // Whether this backend can run `op` on tensors of `dtypes` (the op's
  // tensors in the order the op takes them, as require_support passes
  // them), and why not when it cannot, as ggml's supports_op: callers ask
  // before they plan on an op (the trainer before compute fp8), and the op
  // itself refuses (kInvalidArgument) what this says no to. The CPU runs
  // everything; a CUDA device below sm_89 has no fp8 tensor cores for
  // matmul_fp8.
  virtual OpSupport supports(BackendOp op, std::span<const DType> dtypes) const {
    (void)op;
    (void)dtypes;
    return {};
  }
  // Keeps `bytes` of the device for memory allocated outside this backend
  // (device_reserve.h: the CUDA context, NCCL's buffers): from now on the
  // backend's pool gives back, at each synchronisation, what it holds
  // beyond the rest. The CPU backend keeps no pool.
  virtual void leave_device_memory(int64_t /*bytes*/) {}
  // The tracker counting every allocation of this backend.
  MemoryTracker& memory() const { return *tracker_; }
  // GEMMs that took a slower path than this device offers for them: a
  // linear layer's bias or GELU not fused into cuBLASLt's epilogue, an fp8
  // GEMM dequantized to bf16. 0 on the CPU, which has one path. Workers
  // export it (mixtrain_gemm_fallbacks_total) so a silent slow path shows.
  int64_t gemm_fallbacks() const { return gemm_fallbacks_.load(std::memory_order_relaxed); }

  // ---- memory -----------------------------------------------------------
  // An uninitialized tensor counted under (pool, category).
  Tensor empty(const Shape& shape, DType dtype, MemoryCategory category,
               MemoryPool pool = MemoryPool::kDevice);
  // empty() filled with zeros.
  Tensor zeros(const Shape& shape, DType dtype, MemoryCategory category,
               MemoryPool pool = MemoryPool::kDevice);
  // Copies src into dst (same dtype and numel; any pools) on `stream`.
  void copy(const Tensor& dst, const Tensor& src, StreamKind stream = StreamKind::kCompute);
  // Synchronous copies between host memory and a tensor of any pool.
  virtual void copy_from_host(const Tensor& dst, const void* src) = 0;
  virtual void copy_to_host(void* dst, const Tensor& src) = 0;

  // ---- ordering ---------------------------------------------------------
  virtual std::unique_ptr<Event> record_event(StreamKind stream) = 0;
  // Work enqueued on `stream` after this call waits for `event`.
  virtual void wait_event(StreamKind stream, const Event& event) = 0;
  // Blocks until all enqueued work on all streams is done.
  virtual void synchronize() = 0;

  // ---- elementwise and data movement -----------------------------------
  // dst = src converted (fp32/fp16/bf16/fp8 in any direction; fp8 saturates).
  void cast(const Tensor& dst, const Tensor& src);
  // Every element of t (compute dtype) set to value.
  void fill(const Tensor& t, float value);
  // Every byte of t set to 0 (any dtype). On a host-pool tensor it is done
  // when the call returns, so host code may read it at once.
  void set_zero(const Tensor& t);
  // out = a + b elementwise (residual add); out may alias a or b.
  void add(const Tensor& out, const Tensor& a, const Tensor& b);

  // ---- GEMM -------------------------------------------------------------
  // C = alpha * op(A) op(B) + beta * C (+ bias on every row), fp32 accumulate.
  // 2-D: op(A) (M,K), op(B) (K,N), C (M,N). 3-D: the same per batch index,
  // A, B, C all (batch, ., .). A and B share one dtype; C any compute dtype.
  void matmul(const Tensor& c, const Tensor& a, const Tensor& b, const MatmulOptions& options = {});
  // dbias (N) += column sums of dout (M,N): the bias gradient of matmul.
  void bias_backward(const Tensor& dbias, const Tensor& dout);

  // ---- fp8 ----------------------------------------------------------------
  // Largest |x| of a compute tensor (NaN ignored, inf counts); synchronizes.
  float amax(const Tensor& src);
  // codes (fp8 dtype, src's numel) = src (compute dtype) * scale rounded to
  // fp32 once and cast saturating (numerics/fp8_scaling.h), folding src's
  // amax (a max) and the count of saturated elements (a sum) into slot
  // `slot` of `stats` (fp8_stats_tensor's layout, zeroed by set_zero)
  // without waiting for the device: a training step gathers every
  // quantization's figures and reads them once (read_fp8_stats).
  void quantize_fp8_into(const Tensor& codes, const Tensor& src, float scale, const Tensor& stats,
                         int64_t slot);
  // quantize_fp8_into one fresh slot, read back: src's amax and the count
  // of saturated elements; synchronizes.
  Fp8QuantizeStats quantize_fp8(const Tensor& codes, const Tensor& src, float scale);
  // A zeroed tensor of `slots` quantization statistics slots (kI32,
  // kFp8StatsWords a slot: amax's fp32 bits, a pad word, a 64-bit count),
  // workspace.
  Tensor fp8_stats_tensor(int64_t slots);
  // The slots of `stats` (synchronizes).
  std::vector<Fp8QuantizeStats> read_fp8_stats(const Tensor& stats);
  // MXFP8 (numerics/mx_scaling.h): src (rows, cols) compute dtype into codes
  // (fp8 dtype, same shape) and block_scales (e8m0, mx_scale_count) with
  // blocks along `axis`. Returns the count of clamped elements; synchronizes.
  int64_t mx_quantize(const Tensor& codes, const Tensor& block_scales, const Tensor& src,
                      MxAxis axis);
  // dst (compute dtype, codes' numel) = the values of `src`: per tensor
  // code * (1 / scale) (Transformer Engine's scale_inv), per MX block
  // code * 2^(s - 127); the product rounded to fp32, then to dst.
  void dequantize_fp8(const Tensor& dst, const Fp8Operand& src);
  // The scaled fp8 GEMM: C = alpha * op(A) op(B) + beta * C (+ bias) with
  // A and B the values of two fp8 operands (2-D, shapes as matmul's),
  // products accumulated in fp32. MX operands are blocked along the
  // reduction dimension: A along rows (along columns with trans_a), B
  // along columns (along rows with trans_b). options.bias_grad is refused
  // (the bias gradient belongs to the unquantized output gradient).
  // The shared do_matmul_fp8, which every backend may keep, is the arithmetic of
  // an fp8 tensor core: it dequantizes to bf16 workspace (fp8 values are
  // exact in bf16; per-tensor codes unscaled, the two 1/scale folded into
  // alpha; MX values code * 2^e, exact unless below bf16's normal range)
  // and runs the bf16 matmul.
  void matmul_fp8(const Tensor& c, const Fp8Operand& a, const Fp8Operand& b,
                  const MatmulOptions& options = {});

  // ---- GPT layers -------------------------------------------------------
  // out (N,C) = table[ids] (table (V,C), ids (N) int32); accumulate adds.
  void embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table,
                         bool accumulate);
  // dtable[ids[i]] += dout[i] (scatter-add).
  void embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids);
  // out (N,C) = (inp - mean) * rstd * weight + bias; mean, rstd (N) fp32 saved.
  void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                         const Tensor& inp, const Tensor& weight, const Tensor& bias,
                         float eps = 1e-5f);
  void layernorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias,
                          const Tensor& dout, const Tensor& inp, const Tensor& weight,
                          const Tensor& mean, const Tensor& rstd);
  // RMSNorm (Llama's): out (N,C) = inp * rstd * weight with rstd =
  // 1 / sqrt(mean(inp^2) + eps) per row, saved (N) fp32; fp32 arithmetic,
  // out rounded once.
  void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& inp,
                       const Tensor& weight, float eps = 1e-5f);
  void rmsnorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dout,
                        const Tensor& inp, const Tensor& weight, const Tensor& rstd);
  // Rotary position embedding (Llama's RoPE, Hugging Face's rotate-half
  // convention) of inp (B,T,H,HS), HS even, into out (inp's shape; may be
  // inp itself): in each head, element i < HS/2 and element i + HS/2 of
  // the row at position t are rotated by the angle whose (cos, sin) are
  // freqs[t][i] (freqs (T', HS/2, 2) fp32, T' >= T, as the model computes
  // them from rope_theta):
  //   out[i] = x[i] cos - x[i + HS/2] sin,  out[i + HS/2] = x[i + HS/2] cos + x[i] sin.
  void rope_forward(const Tensor& out, const Tensor& inp, const Tensor& freqs);
  // dinp += dout rotated back (by -angle): the gradient of rope_forward.
  void rope_backward(const Tensor& dinp, const Tensor& dout, const Tensor& freqs);
  // GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  void gelu_forward(const Tensor& out, const Tensor& inp);
  void gelu_backward(const Tensor& dinp, const Tensor& dout, const Tensor& inp);
  // Causal multi-head self-attention. qkv (B,T,3C) holds q, k, v side by
  // side, each (B,T,NH,HS); att (B,NH,T,T) receives the softmax
  // probabilities (saved for backward); out (B,T,C) = att @ v per head.
  void attention_forward(const Tensor& out, const Tensor& att, const Tensor& qkv, int n_head);
  void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                          const Tensor& att, int n_head);
  // losses (N) fp32 = -log softmax(logits)[target] per row (logits (N,V),
  // targets (N) int32). When dlogits is given (it may alias logits), it is
  // overwritten with dloss * (softmax - onehot(target)); softmax in fp32.
  // classes > 0 (at most V): only the first `classes` columns are the
  // distribution; the rest, a vocabulary's padding, are left out of the
  // softmax and get a zero gradient. 0: all V columns.
  void softmax_cross_entropy(const Tensor& losses, const Tensor* dlogits, const Tensor& logits,
                             const Tensor& targets, float dloss, int64_t classes = 0);

  // ---- optimizer and mixed precision -----------------------------------
  // One AdamW step (PyTorch torch.optim.AdamW semantics) on fp32 master, m,
  // v with gradient grad * config.grad_scale (any compute dtype). When
  // param_out is given it receives the updated weights in its dtype.
  void adamw_update(const Tensor& master, const Tensor& m, const Tensor& v, const Tensor& grad,
                    const AdamWConfig& config, const Tensor* param_out);
  // Sum of squares of every element of every tensor, accumulated in fp64.
  double sum_squares(std::span<const Tensor> tensors);
  // Counts the elements of every tensor (compute dtypes or fp8 codes, each
  // its own) into one histogram of magnitudes (numerics/magnitude_histogram.h),
  // each tensor's subnormals judged by its own dtype; synchronizes.
  MagnitudeHistogram magnitude_histogram(std::span<const Tensor> tensors);
  // Multiplies every tensor by inv_scale in place and reports the first
  // tensor holding an inf or NaN afterwards (all tensors are still scaled).
  NonFiniteCheck unscale_and_check(std::span<const Tensor> tensors, float inv_scale);

 protected:
  // ---- the implementations ---------------------------------------------
  // What each backend computes for the op of the same name, called by it
  // after the arguments passed its checks (backend_ops.cc): an
  // implementation checks no argument again.
  virtual void do_copy(const Tensor& dst, const Tensor& src, StreamKind stream) = 0;
  virtual void do_cast(const Tensor& dst, const Tensor& src) = 0;
  virtual void do_fill(const Tensor& t, float value) = 0;
  virtual void do_set_zero(const Tensor& t) = 0;
  virtual void do_add(const Tensor& out, const Tensor& a, const Tensor& b) = 0;
  virtual void do_matmul(const Tensor& c, const Tensor& a, const Tensor& b,
                         const MatmulOptions& options) = 0;
  virtual void do_bias_backward(const Tensor& dbias, const Tensor& dout) = 0;
  virtual float do_amax(const Tensor& src) = 0;
  virtual void do_quantize_fp8_into(const Tensor& codes, const Tensor& src, float scale,
                                    const Tensor& stats, int64_t slot) = 0;
  virtual int64_t do_mx_quantize(const Tensor& codes, const Tensor& block_scales, const Tensor& src,
                                 MxAxis axis) = 0;
  virtual void do_dequantize_fp8(const Tensor& dst, const Fp8Operand& src) = 0;
  virtual void do_matmul_fp8(const Tensor& c, const Fp8Operand& a, const Fp8Operand& b,
                             const MatmulOptions& options);
  virtual void do_embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table,
                                    bool accumulate) = 0;
  virtual void do_embedding_backward(const Tensor& dtable, const Tensor& dout,
                                     const Tensor& ids) = 0;
  virtual void do_layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                    const Tensor& inp, const Tensor& weight, const Tensor& bias,
                                    float eps) = 0;
  virtual void do_layernorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias,
                                     const Tensor& dout, const Tensor& inp, const Tensor& weight,
                                     const Tensor& mean, const Tensor& rstd) = 0;
  virtual void do_rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& inp,
                                  const Tensor& weight, float eps) = 0;
  virtual void do_rmsnorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dout,
                                   const Tensor& inp, const Tensor& weight, const Tensor& rstd) = 0;
  virtual void do_rope_forward(const Tensor& out, const Tensor& inp, const Tensor& freqs) = 0;
  virtual void do_rope_backward(const Tensor& dinp, const Tensor& dout, const Tensor& freqs) = 0;
  virtual void do_gelu_forward(const Tensor& out, const Tensor& inp) = 0;
  virtual void do_gelu_backward(const Tensor& dinp, const Tensor& dout, const Tensor& inp) = 0;
  virtual void do_attention_forward(const Tensor& out, const Tensor& att, const Tensor& qkv,
                                    int n_head) = 0;
  virtual void do_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                                     const Tensor& att, int n_head) = 0;
  virtual void do_softmax_cross_entropy(const Tensor& losses, const Tensor* dlogits,
                                        const Tensor& logits, const Tensor& targets, float dloss,
                                        int64_t classes) = 0;
  virtual void do_adamw_update(const Tensor& master, const Tensor& m, const Tensor& v,
                               const Tensor& grad, const AdamWConfig& config,
                               const Tensor* param_out) = 0;
  virtual double do_sum_squares(std::span<const Tensor> tensors) = 0;
  virtual MagnitudeHistogram do_magnitude_histogram(std::span<const Tensor> tensors) = 0;
  virtual NonFiniteCheck do_unscale_and_check(std::span<const Tensor> tensors, float inv_scale) = 0;

  Backend(std::shared_ptr<Allocator> allocator)
      : allocator_(std::move(allocator)), tracker_(std::make_shared<MemoryTracker>()) {}
  // Throws EngineError(kInvalidArgument) "op: reason" when supports(kind,
  // dtypes) says no.
  void require_support(const char* op, BackendOp kind, std::initializer_list<DType> dtypes) const;
  // One GEMM took a slower path (gemm_fallbacks).
  void count_gemm_fallback() { gemm_fallbacks_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::shared_ptr<Allocator> allocator_;
  std::shared_ptr<MemoryTracker> tracker_;
  std::atomic<int64_t> gemm_fallbacks_{0};
};

// Names of the backends usable in this process: "cpu" always, "cuda" when
// the CUDA backend was compiled in and a device is present.
std::vector<std::string> available_backends();

// What a backend name asks for: "cpu", "cuda" (device -1: chosen by local
// rank, see make_backend), "cuda:N" (device N) or "auto".
struct BackendRequest {
  enum class Kind { kCpu, kCuda, kAuto };
  Kind kind = Kind::kCpu;
  int device = -1;
};

// Parses a backend name; throws EngineError(kInvalidArgument) naming a
// word that is none of the above or a malformed device index.
BackendRequest parse_backend_name(std::string_view name);

// The GPU a rank takes when none is named: its local rank (its place among
// the ranks of its own machine, never its global rank: with 2 machines of
// 3 + 1 GPUs, rank 3 is local rank 0 of the second) modulo the machine's
// `device_count`; 0 without devices.
int default_cuda_device(int local_rank, int device_count);

// The backend `name` names: "cpu"; "cuda:N" (CUDA device N); "cuda" (device
// default_cuda_device(local_rank, the devices present), so the ranks started together on one
// host take a GPU each, as with torchrun's LOCAL_RANK); "auto" (as "cuda"
// when a CUDA device is usable, else "cpu"). Throws EngineError
// (kInvalidArgument) for a malformed name and (kUnavailable) when the
// backend cannot be made here.
std::unique_ptr<Backend> make_backend(std::string_view name, int local_rank = 0);

}  // namespace mixtrain
