// Why: `jobs`, `status`, `submit --follow` and `local` show jobs the same
// way: the state names and JSON objects of DESIGN.md §5, ages like "3m",
// and a finished job's summary as a short table.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "proto/mixtrain.pb.h"

namespace mixtrain::cli {

// "QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED" ("UNSPECIFIED"
// for a state this CLI does not know).
std::string state_name(v1::JobState state);

// True for SUCCEEDED, FAILED and CANCELLED: the job will not change again.
bool is_final(v1::JobState state);

// The §5 object of `job`: id, name, state, attempt, step, steps, workers,
// restarts and message; with `details` also progress, devices (by rank),
// created_unix_ms, updated_unix_ms, events and summary (parse_summary of
// summary_json).
nlohmann::ordered_json job_json(const v1::Job& job, bool details);

// The job's summary_json parsed (parse_json: in linear time, strictly);
// null when it is empty or parse_json refuses it.
nlohmann::ordered_json parse_summary(const std::string& summary_json);

// How long ago `unix_ms` was, coarsely: "42s", "7m", "3h", "2d"; "-" for 0.
std::string format_age(int64_t unix_ms);

// A finished job's §5 summary as "key  value" lines (steps, losses, loss
// scale, throughput, memory peaks per rank), then the gradient-range chart
// when the run measured one. Prints nothing for null.
void print_summary_table(const nlohmann::ordered_json& summary, std::ostream& out);

}  // namespace mixtrain::cli
