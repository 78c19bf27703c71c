// Why: the summary JSON (DESIGN.md §5) is what `--summary-json`, `status -o
// json` and the coordinator read after a run; this is its struct, filled by
// the trainer, and the one serializer that fixes its shape.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend/memory_tracker.h"
#include "engine/common/json.h"

namespace mixtrain {

// Bytes outstanding per (pool, category) and each pool's peak, as one
// MemoryTracker counted them.
struct MemoryReport {
  size_t current[kNumMemoryPools][kNumMemoryCategories] = {};
  size_t peak_total[kNumMemoryPools] = {};
};

// A snapshot of `tracker` now.
MemoryReport memory_report(const MemoryTracker& tracker);

// One rank's entry of "ranks".
struct RankSummary {
  int64_t rank = 0;
  MemoryReport memory;
  int64_t comm_elements_per_step = 0;  // 0 for world size 1
  int64_t comm_bytes_per_step = 0;
};

// A rank's entry as one line of decimal integers, for handing it to rank
// 0 through the rendezvous store, and back. decode throws
// EngineError(kInvalidArgument) for text encode did not write.
std::string encode_rank_summary(const RankSummary& rank);
RankSummary decode_rank_summary(std::string_view text);

struct TrainSummary {
  std::string name;
  std::string status;  // "succeeded", "failed" or "cancelled"
  int64_t steps = 0;   // steps done (applied and skipped)
  int64_t skipped_steps = 0;
  int64_t world_size = 1;
  int64_t zero_stage = 0;
  std::string compute_dtype;  // "fp32", "fp16", "bf16"
  int64_t param_count = 0;
  double tokens_per_second = 0.0;          // training tokens / training wall time of this process
  std::optional<double> final_train_loss;  // unset when no step ran in any attempt
  std::optional<double> final_val_loss;    // unset when evaluation is off
  double loss_scale = 1.0;
  int64_t nan_events = 0;  // steps whose first non-finite gradient was NaN
  int64_t inf_events = 0;  // ... was +-inf
  std::vector<RankSummary> ranks;

  // nan_events + inf_events.
  int64_t nonfinite_events() const { return nan_events + inf_events; }

  // The DESIGN.md §5 object, keys in §5 order. "device" lists every memory
  // category; "host" lists master_params, optimizer_state and params (the
  // only categories offload places there). An unset loss is null.
  Json to_json() const;
};

}  // namespace mixtrain
