// Why: each rank of a job sends its own DESIGN.md §5 summary, whose `ranks`
// holds only its own entry (memory and communication per rank); the job's
// summary is rank 0's with every rank's entry, so `status -o json` shows
// the whole gang. A summary is a worker's untrusted text: it is read once,
// when it arrives and before the scheduler's lock is taken, with bounds
// that keep a hostile one cheap to refuse (issue 29: a 1 MB object of
// 95,000 keys cost 44 s); the merge under the lock reads nothing again.
// The merge itself is the engine's, the one `mixtrain train` uses.
#pragma once

#include <absl/status/statusor.h>

#include <optional>
#include <string>
#include <vector>

#include "engine/train/train_summary.h"

namespace mixtrain::server {

// One rank's summary as it arrived, read.
struct ReportedSummary {
  std::string text;                     // as the worker sent it; "" for none
  std::optional<TrainSummary> summary;  // when `text` is a DESIGN.md §5 summary
};

// `text` read as a rank's summary: an empty text is no summary, and JSON
// that is not a §5 summary is kept as text only. INVALID_ARGUMENT
// "summary_json is not valid JSON: ..." for malformed JSON, nesting deeper
// than a summary's needs allow or an object with more keys than they do.
absl::StatusOr<ReportedSummary> read_reported_summary(std::string text);

// The merged summary of `summaries` (rank 0's first) as compact JSON.
// Ranks that sent no §5 summary add no entries; when rank 0's is not one,
// its text is returned as it came.
std::string merge_rank_summaries(const std::vector<const ReportedSummary*>& summaries);

}  // namespace mixtrain::server
