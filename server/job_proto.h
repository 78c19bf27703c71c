// Why: JobService replies and WatchJob updates show a job the same way;
// the conversion from the store's record lives here once.
#pragma once

#include "proto/mixtrain.pb.h"
#include "server/job_database.h"

namespace mixtrain::server {

// The job as the API shows it; `full` also copies the submitted YAML and
// the summary (GetJob, WatchJob), which listings leave out.
void job_to_proto(const JobRecord& record, bool full, v1::Job& job);

// True for SUCCEEDED, FAILED and CANCELLED: nothing changes afterwards.
bool is_final_state(v1::JobState state);

}  // namespace mixtrain::server
