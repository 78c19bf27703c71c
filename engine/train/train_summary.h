// Why: the summary JSON (DESIGN.md §5) is what `--summary-json`, `status -o
// json` and the coordinator read after a run; this is its struct, filled by
// the trainer, its one reader and writer that fix its shape, and the merge
// of the ranks' summaries into the job's.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/amp/fp8_recipe.h"
#include "engine/backend/memory_tracker.h"
#include "engine/common/json.h"
#include "engine/train/gradient_range.h"

namespace mixtrain {

// Bytes outstanding per (pool, category), each one's peak and each pool's
// peak, as one MemoryTracker counted them.
struct MemoryReport {
  size_t current[kNumMemoryPools][kNumMemoryCategories] = {};
  // Each (pool, category)'s highest value so far, and each pool total's.
  size_t peak[kNumMemoryPools][kNumMemoryCategories] = {};
  size_t peak_total[kNumMemoryPools] = {};

  bool operator==(const MemoryReport&) const = default;
};

// A snapshot of `tracker` now.
MemoryReport memory_report(const MemoryTracker& tracker);
// What a run's summary keeps of `tracker`: the peaks, `current` left 0
// (the JSON's memory_bytes are each category's peak over the run, which
// short-lived buffers such as gathered weights reach, and the pool's).
MemoryReport memory_peaks(const MemoryTracker& tracker);
// The summary's "memory_bytes" object of `memory`'s peaks: {"device":
// {category: bytes, ..., "peak": bytes}, "host": {...}} (DESIGN.md §5).
Json memory_bytes_json(const MemoryReport& memory);

// One rank's entry of "ranks".
struct RankSummary {
  int64_t rank = 0;
  MemoryReport memory;  // memory_peaks

  int64_t comm_elements_per_step = 0;  // 0 for world size 1
  int64_t comm_bytes_per_step = 0;
  // The last gradient-range measurement (precision.stats_every), when one
  // was taken: the JSON key "gradient_range", absent otherwise.
  std::optional<GradientRange> gradient_range;
  // Compute fp8: elements this rank's fp8 quantization clamped to the
  // format's max, by tensor kind: the JSON object "fp8_saturated"
  // {"activation", "weight", "grad_output"}, absent otherwise.
  std::optional<std::array<int64_t, kFp8TensorKinds>> fp8_saturated;

  bool operator==(const RankSummary&) const = default;
};

// What `--summary-json` writes; what the trainer, `mixtrain train`, the
// worker and the coordinator pass around; nothing more than its JSON holds.
struct TrainSummary {
  std::string name;
  std::string status;  // "succeeded", "failed" or "cancelled"
  int64_t steps = 0;   // steps done (applied and skipped)
  int64_t skipped_steps = 0;
  int64_t world_size = 1;
  int64_t zero_stage = 0;
  std::string compute_dtype;  // "fp32", "fp16", "bf16", "fp8"
  int64_t param_count = 0;
  double tokens_per_second = 0.0;          // training tokens / training wall time of this process
  std::optional<double> final_train_loss;  // unset when no step ran in any attempt
  std::optional<double> final_val_loss;    // unset when evaluation is off
  double loss_scale = 1.0;
  int64_t nonfinite_events = 0;  // steps whose gradients held a NaN or infinity
  std::vector<RankSummary> ranks;

  // The DESIGN.md §5 object, keys in §5 order. "device" lists every memory
  // category but data; "host" lists master_params, optimizer_state and
  // params (the only categories offload places there), then data (tokens
  // held in process memory, always host). An unset or non-finite (a
  // diverged run's) loss is null.
  Json to_json() const;
  // Reads what to_json writes (extra keys are ignored). Throws
  // EngineError(kInvalidArgument) naming the first missing or mistyped key.
  static TrainSummary from_json(const Json& json);

  bool operator==(const TrainSummary&) const = default;
};

// The job's summary: the first of `summaries` (rank 0's) with the "ranks"
// entries of all of them, sorted by rank. Used by `mixtrain train` and by
// the coordinator, which each receive one summary per rank.
TrainSummary merge_rank_summaries(std::vector<TrainSummary> summaries);

}  // namespace mixtrain
