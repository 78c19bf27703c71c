// Why: see summary_merge.h.
#include "server/summary_merge.h"

#include "engine/common/error.h"
#include "engine/common/json.h"

namespace mixtrain::server {
namespace {

// A summary nests 4 deep and its largest object has 16 keys; these leave
// room for it to grow. Deeper or wider JSON is refused at the door
// (issues 13 and 29): the coordinator and every CLI that shows the job
// parse it.
constexpr JsonLimits kSummaryLimits{.max_depth = 32, .max_object_keys = 1024};

}  // namespace

absl::StatusOr<ReportedSummary> read_reported_summary(std::string text) {
  ReportedSummary reported{.text = std::move(text)};
  if (reported.text.empty()) return reported;
  Json document;
  try {
    document = parse_json(reported.text, kSummaryLimits);
  } catch (const EngineError& error) {
    return absl::InvalidArgumentError(std::string("summary_json is not valid JSON: ") +
                                      error.what());
  }
  try {
    reported.summary = TrainSummary::from_json(document);
  } catch (const EngineError&) {
    // Not a summary: kept as text (merge_rank_summaries).
  }
  return reported;
}

std::string merge_rank_summaries(const std::vector<const ReportedSummary*>& summaries) {
  if (summaries.empty()) return "";
  if (!summaries[0]->summary) return summaries[0]->text;
  std::vector<TrainSummary> readable;
  for (const ReportedSummary* reported : summaries) {
    if (reported->summary) readable.push_back(*reported->summary);
  }
  return dump_json(mixtrain::merge_rank_summaries(std::move(readable)).to_json());
}

}  // namespace mixtrain::server
