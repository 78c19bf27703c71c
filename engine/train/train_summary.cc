// Why: the one place that fixes the summary JSON's key names and order.
#include "engine/train/train_summary.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "engine/common/error.h"

namespace mixtrain {

namespace {

// JSON has no NaN or infinity: the loss of a diverged run is written as
// null, like one never measured.
std::optional<double> finite_loss(const std::optional<double>& loss) {
  return loss && std::isfinite(*loss) ? loss : std::nullopt;
}

// The categories a pool's JSON lists, in order: the host pool's in
// DESIGN.md §5 order (master_params, optimizer_state, params), then data.
std::vector<MemoryCategory> listed_categories(MemoryPool pool) {
  if (pool == MemoryPool::kHost)
    return {MemoryCategory::kMasterParams, MemoryCategory::kOptimizerState, MemoryCategory::kParams,
            MemoryCategory::kData};
  std::vector<MemoryCategory> listed;
  for (int c = 0; c < kNumMemoryCategories; ++c)
    if (memory_category_in_pool(pool, static_cast<MemoryCategory>(c)))
      listed.push_back(static_cast<MemoryCategory>(c));
  return listed;
}

Json pool_json(const MemoryReport& memory, MemoryPool pool) {
  const int p = static_cast<int>(pool);
  Json out = Json::object();
  for (MemoryCategory category : listed_categories(pool))
    out[memory_category_name(category)] = memory.peak[p][static_cast<int>(category)];
  out["peak"] = memory.peak_total[p];
  return out;
}

// A byte count of the summary: a non-negative integer.
size_t bytes_field(const JsonFields& pool, std::string_view key) {
  const int64_t bytes = pool.integer(key);
  MIXTRAIN_CHECK_ARG(bytes >= 0,
                     "summary JSON: negative memory_bytes \"" + std::string(key) + "\"");
  return static_cast<size_t>(bytes);
}

void read_pool(const JsonFields& fields, MemoryPool pool, MemoryReport& memory) {
  const int p = static_cast<int>(pool);
  for (MemoryCategory category : listed_categories(pool))
    memory.peak[p][static_cast<int>(category)] =
        bytes_field(fields, memory_category_name(category));
  memory.peak_total[p] = bytes_field(fields, "peak");
}

}  // namespace

Json memory_bytes_json(const MemoryReport& memory) {
  Json out = Json::object();
  out["device"] = pool_json(memory, MemoryPool::kDevice);
  out["host"] = pool_json(memory, MemoryPool::kHost);
  return out;
}

MemoryReport memory_peaks(const MemoryTracker& tracker) {
  MemoryReport report = memory_report(tracker);
  for (auto& pool : report.current) std::fill(std::begin(pool), std::end(pool), size_t{0});
  return report;
}

MemoryReport memory_report(const MemoryTracker& tracker) {
  MemoryReport report;
  for (int p = 0; p < kNumMemoryPools; ++p) {
    const auto pool = static_cast<MemoryPool>(p);
    for (int c = 0; c < kNumMemoryCategories; ++c) {
      report.current[p][c] = tracker.current(pool, static_cast<MemoryCategory>(c));
      report.peak[p][c] = tracker.peak(pool, static_cast<MemoryCategory>(c));
    }
    report.peak_total[p] = tracker.peak_total(pool);
  }
  return report;
}

Json TrainSummary::to_json() const {
  Json out = Json::object();
  out["name"] = name;
  out["status"] = status;
  out["steps"] = steps;
  out["skipped_steps"] = skipped_steps;
  out["world_size"] = world_size;
  out["zero_stage"] = zero_stage;
  out["compute_dtype"] = compute_dtype;
  out["param_count"] = param_count;
  out["tokens_per_second"] = tokens_per_second;
  out["final_train_loss"] = number_or_null(finite_loss(final_train_loss));
  out["final_val_loss"] = number_or_null(finite_loss(final_val_loss));
  out["loss_scale"] = loss_scale;
  out["nonfinite_events"] = nonfinite_events;
  Json rank_list = Json::array();
  for (const RankSummary& rank : ranks) {
    Json entry = Json::object();
    entry["rank"] = rank.rank;
    entry["memory_bytes"] = memory_bytes_json(rank.memory);
    entry["comm_elements_per_step"] = rank.comm_elements_per_step;
    entry["comm_bytes_per_step"] = rank.comm_bytes_per_step;
    if (rank.gradient_range) entry["gradient_range"] = rank.gradient_range->to_json();
    if (rank.fp8_saturated) {
      Json saturated = Json::object();
      for (int k = 0; k < kFp8TensorKinds; ++k)
        saturated[fp8_tensor_kind_name(static_cast<Fp8TensorKind>(k))] =
            (*rank.fp8_saturated)[static_cast<size_t>(k)];
      entry["fp8_saturated"] = std::move(saturated);
    }
    rank_list.push_back(std::move(entry));
  }
  out["ranks"] = std::move(rank_list);
  return out;
}

TrainSummary TrainSummary::from_json(const Json& json) {
  const JsonFields root(json, "summary JSON");
  TrainSummary out;
  out.name = root.string("name");
  out.status = root.string("status");
  out.steps = root.integer("steps");
  out.skipped_steps = root.integer("skipped_steps");
  out.world_size = root.integer("world_size");
  out.zero_stage = root.integer("zero_stage");
  out.compute_dtype = root.string("compute_dtype");
  out.param_count = root.integer("param_count");
  out.tokens_per_second = root.number("tokens_per_second");
  out.final_train_loss = root.optional_number("final_train_loss");
  out.final_val_loss = root.optional_number("final_val_loss");
  out.loss_scale = root.number("loss_scale");
  out.nonfinite_events = root.integer("nonfinite_events");
  for (const Json& entry : root.array("ranks")) {
    const JsonFields rank(entry, "summary JSON", "ranks[].");
    RankSummary parsed;
    parsed.rank = rank.integer("rank");
    const JsonFields memory = rank.object("memory_bytes");
    read_pool(memory.object("device"), MemoryPool::kDevice, parsed.memory);
    read_pool(memory.object("host"), MemoryPool::kHost, parsed.memory);
    parsed.comm_elements_per_step = rank.integer("comm_elements_per_step");
    parsed.comm_bytes_per_step = rank.integer("comm_bytes_per_step");
    if (entry.contains("gradient_range"))
      parsed.gradient_range = GradientRange::from_json(entry["gradient_range"]);
    if (entry.contains("fp8_saturated")) {
      const JsonFields saturated = rank.object("fp8_saturated");
      parsed.fp8_saturated.emplace();
      for (int k = 0; k < kFp8TensorKinds; ++k)
        (*parsed.fp8_saturated)[static_cast<size_t>(k)] =
            saturated.integer(fp8_tensor_kind_name(static_cast<Fp8TensorKind>(k)));
    }
    out.ranks.push_back(parsed);
  }
  return out;
}

TrainSummary merge_rank_summaries(std::vector<TrainSummary> summaries) {
  MIXTRAIN_CHECK_ARG(!summaries.empty(), "merge_rank_summaries: no summaries");
  TrainSummary merged = std::move(summaries.front());
  for (size_t i = 1; i < summaries.size(); ++i) {
    for (RankSummary& rank : summaries[i].ranks) merged.ranks.push_back(std::move(rank));
  }
  std::stable_sort(merged.ranks.begin(), merged.ranks.end(),
                   [](const RankSummary& a, const RankSummary& b) { return a.rank < b.rank; });
  return merged;
}

}  // namespace mixtrain
