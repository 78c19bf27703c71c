// Why: data-parallel training with ZeRO (Rajbhandari et al., 2020). This
// owns one rank's model state (working weights, gradients, fp32 master
// weights, AdamW moments), placed and partitioned as the stage says, and
// runs the step stages that touch it: reduction of gradients as backward
// releases each unit, the overflow check and gradient norm agreed by all
// ranks, and the AdamW step on this rank's partition followed by the
// gathering of the updated weights.
//
//   stage  working weights   gradients        master + m + v
//   0      full              full, all-reduce full
//   1      full              full, reduce-scatter   partition
//   2      full              partition        partition
//   3      partition         partition        partition
//
// Partitions follow ZeroPartition: rank r owns chunk r of every unit of
// the padded layout (Gpt built with unit_alignment = world size). Stage 3
// all-gathers a unit's weights when the GPT acquires it (having started
// the gather when the unit before it in the pass was acquired) and frees
// them on release; stages 2 and 3 give backward a unit-sized gradient bucket and
// reduce-scatter it into the partition when backward releases the unit,
// with at most two buckets in flight. Those buffers are taken from and
// given back to ReusedBuffers, so they are allocated in the first step
// only. On a GPU no collective waits for the device: each waits, on the
// communicator's stream, for an event recorded on the compute stream. Offload puts master and moments
// (offload_optimizer) and stage 3's weight partition (offload_params) in
// the host pool. The offloaded AdamW runs on the CPU (the CPU backend's
// vectorized kernel) on any backend: each unit's gradient chunk is copied
// to the host pool on the transfer stream, and while the CPU updates one
// unit the next unit's gradients and the previous unit's weights travel
// (on the CPU backend the copies are plain memcpys between the pools).
// Every rank must call the same methods in the same order.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/comm/communicator.h"
#include "engine/model/gpt.h"
#include "engine/optim/adamw.h"
#include "engine/zero/reused_buffers.h"
#include "engine/zero/zero_partition.h"

namespace mixtrain {

struct ZeroSettings {
  int stage = 0;                   // 0..3
  bool offload_optimizer = false;  // master, m and v in the host pool
  bool offload_params = false;     // stage 3: the weight partition in the host pool
  // Stage 0 all-reduces gradients in buckets of consecutive units of at
  // least this many bytes (the last one smaller); stages 1-3 reduce each
  // unit on its own, as its chunks are the partition.
  int64_t bucket_bytes = 25 << 20;
};

class ZeroEngine {
 public:
  // State for `gpt` (whose layout is aligned to the world size) on
  // `backend`; comm null means one rank. Both must outlive the engine.
  // Throws EngineError(kInvalidArgument) for a stage outside 0..3,
  // offload_params below stage 3, a misaligned layout, offload on a
  // non-CPU backend, or a communicator whose device is not the backend's.
  ZeroEngine(Backend& backend, const Gpt& gpt, Communicator* comm, ZeroSettings settings);
  ~ZeroEngine();
  ZeroEngine(const ZeroEngine&) = delete;
  ZeroEngine& operator=(const ZeroEngine&) = delete;

  int rank() const { return partition_.rank(); }
  int world_size() const { return world_size_; }
  const ZeroSettings& settings() const { return settings_; }
  // What this rank's master, adam_m and adam_v hold: the whole layout
  // (stage 0: one partition of world size 1) or its partition.
  const ZeroPartition& optimizer_partition() const { return optimizer_partition_; }
  // fp32 tensors of optimizer_partition().numel() elements.
  const Tensor& master() const { return master_; }
  const Tensor& adam_m() const { return adam_m_; }
  const Tensor& adam_v() const { return adam_v_; }

  // The fp32 optimizer state, by tensor.
  enum class State { kMaster, kAdamM, kAdamV };
  // Takes this rank's part of `full` (fp32, the layout's numel() values,
  // padding zero; the same on every rank) into the `which` tensor. After
  // the master weights changed, refresh_weights() must follow.
  void load(State which, std::span<const float> full);
  // The `which` tensor of the whole padded layout (numel() values),
  // gathered from every rank's partition (a collective).
  std::vector<float> gather(State which);
  // The `which` tensor's elements at optimizer_partition().segments(),
  // packed in segment order: the values this rank owns, without padding.
  std::vector<float> owned_values(State which) const;
  // The inverse: copies `packed` (owned_values' order and size) into the
  // `which` tensor, whose padding is left as it is (zero). After the master
  // weights changed, refresh_weights() must follow.
  void load_owned(State which, std::span<const float> packed);
  // Re-derives the working weights from the master weights (on every rank).
  void refresh_weights();

  // ---- one step -----------------------------------------------------------
  // Zeroes the gradients.
  void begin_step();
  // The weights for one training micro-batch: its forward and backward.
  // With reduce false (not the step's last micro-batch) stages 0 and 1
  // only accumulate locally; stages 2 and 3 reduce every micro-batch.
  GptWeights& train_weights(bool reduce);
  // The weights for a forward-only pass (evaluation, sampling).
  GptWeights& eval_weights();
  // Waits for every gradient reduction: this rank's owned gradients now
  // hold the sum over ranks.
  void finish_gradients();
  // The first parameter (layout index) whose owned gradient holds inf/NaN,
  // agreed by every rank.
  NonFiniteCheck check_gradients();
  // The global L2 norm of the gradients, divided by loss_scale.
  double gradient_norm(float loss_scale);
  // `value` reduced over the ranks (fp32; one rank: itself).
  float all_reduce_scalar(float value, ReduceOp op);
  // AdamW (adamw_step) on this rank's partition, then the updated working
  // weights on every rank.
  void optimizer_step(const AdamWConfig& config);

 private:
  class Weights;
  struct PendingReduce {
    CommHandle handle;
    size_t unit;
    Tensor bucket;  // the unit's gradient (stages 2, 3), freed once reduced
    Tensor shard;   // the reduced chunk, to add into the partition
  };

  const Tensor& state_tensor(State which) const;
  // The event a collective waits for before it touches its buffers: the
  // compute stream's work so far (GPU); null on the CPU, where it is done.
  ReadyEvent inputs_ready();
  // `chunk` where the communicator can read it: itself, or (a GPU
  // backend's host-pool tensor) a device copy.
  Tensor reachable(const Tensor& chunk);
  // The AdamW parameters of the optimizer segments in [first, end), reading
  // gradients from `grads` and writing weights to `working` (each undefined:
  // this engine's own buffers).
  std::vector<AdamWParam> adam_params(size_t first, size_t end, const Tensor& grads,
                                      const Tensor& working) const;
  // optimizer_step with master and moments offloaded to the host pool.
  void host_optimizer_step(const AdamWConfig& config);
  // Tensor of `numel` elements in a pool.
  Tensor allocate(int64_t numel, DType dtype, MemoryCategory category, bool host = false);
  // The views of the owned gradients, one per owned parameter segment.
  std::vector<Tensor> owned_gradient_views() const;
  // Called by Weights: gather / free stage 3 weights, start reductions.
  void on_acquire(size_t unit, GptPass pass);
  void on_release(size_t unit, GptPass pass, bool reduce);
  // The unit a pass acquires after `unit`, or nullopt after its last.
  std::optional<size_t> next_unit(size_t unit, GptPass pass) const;
  // Starts the stage-3 gather of `unit`'s weights into a reused buffer.
  void start_gather(size_t unit);
  // Stage 0: submits the all-reduce of the open bucket, if any.
  void flush_bucket();
  // Waits for pending reductions until at most `keep` remain.
  void drain(size_t keep);
  // Gathers the owned chunks of the full working weights (stages 1, 2).
  void gather_weights();

  Backend& backend_;
  const ParameterLayout& layout_;
  Communicator* comm_;
  ZeroSettings settings_;
  int world_size_;
  DType compute_dtype_;
  DType grad_dtype_;
  ZeroPartition partition_;            // this rank's chunks of every unit
  ZeroPartition optimizer_partition_;  // what master/m/v hold (partition_ or everything)

  Tensor params_;  // full working weights (stages 0-2) or partition (stage 3)
  Tensor grads_;   // full gradients (stages 0, 1) or partition (stages 2, 3)
  Tensor master_, adam_m_, adam_v_;
  ReusedBuffers gathered_buffers_;  // stage 3: what gathered_ and prefetch_ hold
  ReusedBuffers reduce_buffers_;    // stages 2, 3: buckets and reduced shards
  std::vector<Tensor> gathered_;    // stage 3: per unit, while acquired
  struct Prefetch {
    size_t unit;
    Tensor buffer;
    CommHandle handle;
  };
  std::optional<Prefetch> prefetch_;  // stage 3: the next unit's gather in flight
  std::vector<Tensor> buckets_;       // stages 2, 3: per unit, during backward
  std::deque<PendingReduce> pending_;
  // Stage 0: the released units' gradient range not yet submitted, [begin, end).
  int64_t bucket_begin_ = 0, bucket_end_ = 0;
  std::unique_ptr<Weights> weights_;
  // offload_optimizer: the CPU backend running AdamW on the
  // host-pool state, and the host copies of the owned gradients and of the
  // updated weights (optimizer-partition order).
  std::unique_ptr<Backend> host_ops_;
  Tensor host_grads_, host_weights_;
  // optimizer_partition_.segments() index range of each unit's shard.
  std::vector<std::pair<size_t, size_t>> unit_segments_;
};

}  // namespace mixtrain
