// Why: see job_schema.h.
#include "server/job_schema.h"

#include <algorithm>
#include <vector>


namespace mixtrain::server {
namespace {

#define RETURN_IF_ERROR(expr)               \
  if (absl::Status _s = (expr); !_s.ok()) { \
    return _s;                              \
  }

// Version 1: the tables as the stores before versions had them, whatever
// release wrote them. Their first release's tables...
constexpr const char* kFirstTables = R"sql(
CREATE TABLE IF NOT EXISTS jobs(
  id TEXT PRIMARY KEY, name TEXT NOT NULL, state INTEGER NOT NULL, spec_yaml TEXT NOT NULL,
  steps INTEGER NOT NULL, attempt INTEGER NOT NULL, message TEXT NOT NULL,
  created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state);
CREATE TABLE IF NOT EXISTS attempts(
  job_id TEXT NOT NULL REFERENCES jobs(id), attempt INTEGER NOT NULL,
  started_ms INTEGER NOT NULL, ended_ms INTEGER NOT NULL DEFAULT 0,
  outcome INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(job_id, attempt));
CREATE TABLE IF NOT EXISTS events(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL REFERENCES jobs(id),
  unix_ms INTEGER NOT NULL, state INTEGER NOT NULL, message TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_by_job ON events(job_id, seq);
CREATE TABLE IF NOT EXISTS logs(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL REFERENCES jobs(id),
  attempt INTEGER NOT NULL, rank INTEGER NOT NULL, unix_ms INTEGER NOT NULL,
  text TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS logs_by_job ON logs(job_id, seq);
CREATE TABLE IF NOT EXISTS assignments(
  job_id TEXT NOT NULL REFERENCES jobs(id), attempt INTEGER NOT NULL, rank INTEGER NOT NULL,
  worker_id TEXT NOT NULL, PRIMARY KEY(job_id, attempt, rank));
)sql";

// ...and the columns later releases added to `jobs`, each on the first
// open by a release that knew it. NULL needs and spec_json mark rows
// stored before those columns existed (JobDatabase fills them once).
constexpr std::pair<const char*, const char*> kLaterJobColumns[] = {
    {"restarts", "INTEGER NOT NULL DEFAULT 0"},
    {"progress", "TEXT NOT NULL DEFAULT ''"},
    {"summary_json", "TEXT NOT NULL DEFAULT ''"},
    {"needs_workers", "INTEGER"},
    {"needs_backend", "INTEGER"},
    {"needs_max_restarts", "INTEGER"},
    {"needs_min_loss_scale", "REAL"},  // NULL: static loss scaling
    {"needs_min_compute_capability", "INTEGER"},
    {"spec_json", "TEXT"},  // config::job_spec_to_json of the validated spec
    {"needs_configurations", "TEXT"},  // configurations_json of JobNeeds::configurations
    {"configuration", "TEXT NOT NULL DEFAULT ''"},  // what the last start's `auto` became
    {"needs_priority", "INTEGER"},
    {"needs_preemptible", "INTEGER"},
};

// The columns of `jobs` now, as PRAGMA table_info lists them.
absl::StatusOr<std::vector<std::string>> job_table_columns(SqliteDb& db) {
  absl::StatusOr<SqliteStatement> select = db.prepare("SELECT name FROM pragma_table_info('jobs')");
  if (!select.ok()) return select.status();
  std::vector<std::string> names;
  while (true) {
    absl::StatusOr<bool> has_row = select->step();
    if (!has_row.ok()) return has_row.status();
    if (!*has_row) return names;
    names.push_back(select->column_text(0));
  }
}

absl::Status to_version_1(SqliteDb& db) {
  RETURN_IF_ERROR(db.exec(kFirstTables));
  const absl::StatusOr<std::vector<std::string>> present = job_table_columns(db);
  if (!present.ok()) return present.status();
  for (const auto& [name, type] : kLaterJobColumns) {
    if (std::find(present->begin(), present->end(), name) != present->end()) continue;
    RETURN_IF_ERROR(
        db.exec(("ALTER TABLE jobs ADD COLUMN " + std::string(name) + " " + type).c_str()));
  }
  return absl::OkStatus();
}

// Version 2: the index a scheduler pass reads instead of the jobs rows
// (their columns after spec_yaml lie behind its overflow pages: a pass
// over 10,000 queued jobs with 60 KB specs read 30 pages per job), and
// without the columns of the single configuration the releases between
// needs_workers and needs_configurations stored, unread since.
absl::Status to_version_2(SqliteDb& db) {
  RETURN_IF_ERROR(db.exec(
      "CREATE INDEX IF NOT EXISTS jobs_active ON jobs(state, id, name, steps, attempt, message, "
      "created_ms, updated_ms, restarts, progress, configuration) WHERE state IN (1, 2, 6)"));
  const absl::StatusOr<std::vector<std::string>> present = job_table_columns(db);
  if (!present.ok()) return present.status();
  for (const char* dead :
       {"needs_zero_stage", "needs_parameters", "needs_device_bytes", "needs_host_bytes"}) {
    if (std::find(present->begin(), present->end(), dead) == present->end()) continue;
    RETURN_IF_ERROR(db.exec(("ALTER TABLE jobs DROP COLUMN " + std::string(dead)).c_str()));
  }
  return absl::OkStatus();
}

// kMigrations[v - 1] brings a store of version v - 1 to version v.
constexpr absl::Status (*kMigrations[])(SqliteDb&) = {to_version_1, to_version_2};
static_assert(std::size(kMigrations) == kJobSchemaVersion, "one migration per version");

std::string join(std::span<const char* const> names, const char* prefix) {
  std::string out;
  for (const char* name : names) out += (out.empty() ? "" : ", ") + std::string(prefix) + name;
  return out;
}

}  // namespace

absl::Status migrate_job_schema(SqliteDb& db) {
  absl::StatusOr<SqliteStatement> read = db.prepare("PRAGMA user_version");
  if (!read.ok()) return read.status();
  RETURN_IF_ERROR(read->step().status());
  const int64_t version = read->column_int64(0);
  if (version > kJobSchemaVersion) {
    return absl::FailedPreconditionError(
        "the job database is of schema version " + std::to_string(version) +
        ", written by a newer mixtrain-coordinator; this one knows versions up to " +
        std::to_string(kJobSchemaVersion));
  }
  for (int64_t next = version + 1; next <= kJobSchemaVersion; ++next) {
    absl::StatusOr<SqliteTransaction> tx = SqliteTransaction::begin(db);
    if (!tx.ok()) return tx.status();
    RETURN_IF_ERROR(kMigrations[next - 1](db));
    RETURN_IF_ERROR(db.exec(("PRAGMA user_version = " + std::to_string(next)).c_str()));
    RETURN_IF_ERROR(tx->commit());
  }
  return absl::OkStatus();
}

std::string select_jobs(bool with_texts, bool with_needs, std::string_view extra) {
  std::string sql;
  for (const char* name : kJobColumnNames) {
    const std::string_view column(name);
    const char* value = name;
    if (!with_texts && (column == "spec_yaml" || column == "summary_json")) value = "''";
    if (!with_texts && column == "spec_json") value = "NULL";
    if (!with_needs && column.starts_with("needs_")) value = "NULL";
    sql += (sql.empty() ? "SELECT " : ", ") + std::string(value);
    if (value != name) sql += " AS " + std::string(column);
  }
  if (!extra.empty()) sql += ", " + std::string(extra);
  return sql + " FROM jobs ";
}

std::string insert_job(std::span<const char* const> names) {
  return "INSERT INTO jobs(" + join(names, "") + ") VALUES(" + join(names, ":") + ")";
}

std::string assignments_of(std::span<const char* const> names) {
  std::string out;
  for (const char* name : names)
    out += (out.empty() ? "" : ", ") + std::string(name) + " = :" + name;
  return out;
}

}  // namespace mixtrain::server
