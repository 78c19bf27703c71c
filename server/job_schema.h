// Why: the job database's tables were created by one string, grown by
// ALTER TABLE on every open, and read by column position, so a column
// added in the middle shifted every read after it. This holds the schema
// once: the columns of `jobs` by name (what every statement selects,
// inserts and updates is built from them), the schema's version in
// PRAGMA user_version, and the numbered migrations from each version to
// the next, each run in its own transaction when a store is opened.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include <absl/status/status.h>

#include "server/sqlite_db.h"

namespace mixtrain::server {

// The version a store is migrated to; a store of a later one is refused.
inline constexpr int kJobSchemaVersion = 2;

// Brings the store at `db` from its version (0: new, or written before
// versions) to kJobSchemaVersion, one migration a transaction. A store of
// a version past this build's is FAILED_PRECONDITION naming both.
absl::Status migrate_job_schema(SqliteDb& db);

// The columns of `jobs`, in table order.
inline constexpr const char* kJobColumnNames[] = {
    "id", "name", "state", "spec_yaml", "steps", "attempt", "message", "created_ms",
    "updated_ms", "restarts", "progress", "summary_json", "needs_workers", "needs_backend",
    "needs_max_restarts", "needs_min_loss_scale", "needs_min_compute_capability", "spec_json",
    "needs_configurations", "configuration", "needs_priority", "needs_preemptible"};

// The columns that hold a job's JobNeeds (job_needs.h).
inline constexpr const char* kNeedsColumnNames[] = {
    "needs_workers",        "needs_backend",
    "needs_max_restarts",   "needs_configurations",
    "needs_min_loss_scale", "needs_min_compute_capability",
    "needs_priority",       "needs_preemptible"};

// "SELECT <every jobs column> FROM jobs ": the long texts (spec_yaml,
// summary_json as '', spec_json as NULL) and the needs (NULL) only when
// asked for, each under its own name either way; `extra` ("expr AS
// name"), when given, is selected after them.
std::string select_jobs(bool with_texts, bool with_needs, std::string_view extra = "");

// "INSERT INTO jobs(a, b) VALUES(:a, :b)" for the columns `names`.
std::string insert_job(std::span<const char* const> names);

// "a = :a, b = :b" for `names`: an UPDATE's SET list.
std::string assignments_of(std::span<const char* const> names);

}  // namespace mixtrain::server
