// Why: each rank of a job sends its own DESIGN.md §5 summary, whose `ranks`
// holds only its own entry (memory and communication per rank); the job's
// summary is rank 0's with every rank's entry, so `status -o json` shows
// the whole gang. The merge itself is the engine's, the one `mixtrain
// train` uses; this reads the texts the workers sent.
#pragma once

#include <string>
#include <vector>

namespace mixtrain::server {

// The merged summary of `summaries` (rank 0's first) as compact JSON. A
// text that is not a summary adds no entries; when rank 0's is not one, it
// is returned as it came.
std::string merge_rank_summaries(const std::vector<std::string>& summaries);

}  // namespace mixtrain::server
