// Why: see job_proto.h.
#include "server/job_proto.h"

namespace mixtrain::server {

void job_to_proto(const JobRecord& record, bool full, v1::Job& job) {
  job.set_id(record.id);
  job.set_name(record.name);
  job.set_state(record.state);
  if (full) {
    job.set_spec_yaml(record.spec_yaml);
    job.set_summary_json(record.summary_json);
  }
  job.set_attempt(record.attempt);
  *job.mutable_progress() = record.progress;
  for (const std::string& worker : record.workers) job.add_workers(worker);
  job.set_created_unix_ms(record.created_unix_ms);
  job.set_updated_unix_ms(record.updated_unix_ms);
  job.set_message(record.message);
  job.set_restarts(record.restarts);
  job.set_configuration(record.configuration);
  if (record.needs) job.set_priority(record.needs->priority);
}

bool is_final_state(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

}  // namespace mixtrain::server
