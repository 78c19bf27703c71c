// Why: the coordinator parses and validates a job's YAML once, at submit,
// and hands each of its tasks the result; this is the form it travels and
// is stored in: JSON with every key of the spec, nothing left to parse
// but JSON and nothing to default differently.
#pragma once

#include "engine/common/json.h"
#include "engine/config/job_spec.h"

namespace mixtrain::config {

// {"name": ..., "model": {"arch": "gpt", ...}, "data": {...}, ...}: every
// key of every section (job_spec_fields.h), unset optionals as null, enums
// and the compute dtype as the spec spells them, a key left to the planner
// as "auto".
Json job_spec_to_json(const JobSpec& spec);

// The inverse: job_spec_from_json(job_spec_to_json(s)) == s. Throws
// EngineError(kInvalidArgument) "job spec JSON: ..." naming a missing,
// unknown or mistyped key. The values are not validate()d.
JobSpec job_spec_from_json(const Json& json);

}  // namespace mixtrain::config
