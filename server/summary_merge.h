// Why: each rank of a job sends its own DESIGN.md §5 summary, whose `ranks`
// holds only its own entry (memory and communication per rank); the job's
// summary is rank 0's with every rank's entry, so `status -o json` shows
// the whole gang.
#pragma once

#include <string>
#include <vector>

namespace mixtrain::server {

// Rank 0's summary (`summaries[0]`) with the `ranks` entries of every
// summary, sorted by "rank". A summary that is not a JSON object adds no
// entries; when rank 0's is not one, it is returned as it came.
std::string merge_rank_summaries(const std::vector<std::string>& summaries);

}  // namespace mixtrain::server
