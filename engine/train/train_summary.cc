// Why: the one place that fixes the summary JSON's key names and order.
#include "engine/train/train_summary.h"

#include <sstream>

#include "engine/common/error.h"

namespace mixtrain {

namespace {

constexpr MemoryCategory kHostCategories[] = {
    MemoryCategory::kMasterParams, MemoryCategory::kOptimizerState, MemoryCategory::kParams};

Json optional_number(const std::optional<double>& value) {
  return value ? Json(*value) : Json(nullptr);
}

Json pool_json(const MemoryReport& memory, MemoryPool pool) {
  const int p = static_cast<int>(pool);
  Json out = Json::object();
  if (pool == MemoryPool::kDevice) {
    for (int c = 0; c < kNumMemoryCategories; ++c)
      out.set(memory_category_name(static_cast<MemoryCategory>(c)), memory.current[p][c]);
  } else {
    for (MemoryCategory category : kHostCategories)
      out.set(memory_category_name(category), memory.current[p][static_cast<int>(category)]);
  }
  out.set("peak", memory.peak_total[p]);
  return out;
}

}  // namespace

MemoryReport memory_report(const MemoryTracker& tracker) {
  MemoryReport report;
  for (int p = 0; p < kNumMemoryPools; ++p) {
    const auto pool = static_cast<MemoryPool>(p);
    for (int c = 0; c < kNumMemoryCategories; ++c)
      report.current[p][c] = tracker.current(pool, static_cast<MemoryCategory>(c));
    report.peak_total[p] = tracker.peak_total(pool);
  }
  return report;
}

Json TrainSummary::to_json() const {
  Json out = Json::object();
  out.set("name", name);
  out.set("status", status);
  out.set("steps", steps);
  out.set("skipped_steps", skipped_steps);
  out.set("world_size", world_size);
  out.set("zero_stage", zero_stage);
  out.set("compute_dtype", compute_dtype);
  out.set("param_count", param_count);
  out.set("tokens_per_second", tokens_per_second);
  out.set("final_train_loss", optional_number(final_train_loss));
  out.set("final_val_loss", optional_number(final_val_loss));
  out.set("loss_scale", loss_scale);
  out.set("nonfinite_events", nonfinite_events());
  Json rank_list = Json::array();
  for (const RankSummary& rank : ranks) {
    Json memory = Json::object();
    memory.set("device", pool_json(rank.memory, MemoryPool::kDevice));
    memory.set("host", pool_json(rank.memory, MemoryPool::kHost));
    Json entry = Json::object();
    entry.set("rank", rank.rank);
    entry.set("memory_bytes", std::move(memory));
    entry.set("comm_elements_per_step", rank.comm_elements_per_step);
    entry.set("comm_bytes_per_step", rank.comm_bytes_per_step);
    rank_list.push_back(std::move(entry));
  }
  out.set("ranks", std::move(rank_list));
  return out;
}

std::string encode_rank_summary(const RankSummary& rank) {
  std::string out = std::to_string(rank.rank) + " " + std::to_string(rank.comm_elements_per_step) +
                    " " + std::to_string(rank.comm_bytes_per_step);
  for (int p = 0; p < kNumMemoryPools; ++p) {
    for (int c = 0; c < kNumMemoryCategories; ++c)
      out += " " + std::to_string(rank.memory.current[p][c]);
    out += " " + std::to_string(rank.memory.peak_total[p]);
  }
  return out;
}

RankSummary decode_rank_summary(std::string_view text) {
  std::istringstream in{std::string(text)};
  RankSummary out;
  in >> out.rank >> out.comm_elements_per_step >> out.comm_bytes_per_step;
  for (int p = 0; p < kNumMemoryPools; ++p) {
    for (int c = 0; c < kNumMemoryCategories; ++c) in >> out.memory.current[p][c];
    in >> out.memory.peak_total[p];
  }
  std::string rest;
  MIXTRAIN_CHECK_ARG(in && !(in >> rest), "decode_rank_summary: not an encoded rank summary: \"" +
                                              std::string(text) + "\"");
  return out;
}

}  // namespace mixtrain
