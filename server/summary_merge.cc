// Why: see summary_merge.h.
#include "server/summary_merge.h"

#include <optional>

#include "engine/common/error.h"
#include "engine/train/train_summary.h"

namespace mixtrain::server {
namespace {

std::optional<TrainSummary> read_summary(const std::string& text) {
  try {
    return TrainSummary::from_json(parse_json(text));
  } catch (const EngineError&) {
    return std::nullopt;
  }
}

}  // namespace

std::string merge_rank_summaries(const std::vector<std::string>& summaries) {
  if (summaries.empty()) return "";
  std::optional<TrainSummary> rank0 = read_summary(summaries[0]);
  if (!rank0) return summaries[0];
  std::vector<TrainSummary> readable{std::move(*rank0)};
  for (size_t i = 1; i < summaries.size(); ++i) {
    if (std::optional<TrainSummary> summary = read_summary(summaries[i])) {
      readable.push_back(std::move(*summary));
    }
  }
  return dump_json(mixtrain::merge_rank_summaries(std::move(readable)).to_json());
}

}  // namespace mixtrain::server
