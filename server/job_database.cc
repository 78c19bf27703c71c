// Why: see job_database.h. Job states are stored as their mixtrain.v1.JobState
// numbers, which the proto contract keeps stable.
#include "server/job_database.h"

#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <utility>

#include "engine/common/error.h"
#include "engine/common/json.h"
#include "engine/config/job_spec_json.h"
#include "jobspec/job_spec_yaml.h"
#include "server/ids.h"
#include "server/job_schema.h"

namespace mixtrain::server {
namespace {

#define RETURN_IF_ERROR(expr)               \
  if (absl::Status _s = (expr); !_s.ok()) { \
    return _s;                              \
  }
#define ASSIGN_OR_RETURN(lhs, expr)             \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = std::move(*lhs##_or)

// The states whose jobs the scheduler holds: waiting, or with ranks running.
const std::string kActiveStates = std::to_string(v1::JOB_STATE_QUEUED) + ", " +
                                  std::to_string(v1::JOB_STATE_RUNNING) + ", " +
                                  std::to_string(v1::JOB_STATE_PREEMPTED);

// Binds `needs` to the parameters named after kNeedsColumnNames.
SqliteStatement& bind_needs(SqliteStatement& statement, const JobNeeds& needs) {
  statement.bind(":needs_workers", int64_t{needs.workers})
      .bind(":needs_backend", static_cast<int64_t>(needs.backend))
      .bind(":needs_max_restarts", int64_t{needs.max_restarts})
      .bind(":needs_configurations", configurations_json(needs.configurations))
      .bind(":needs_min_compute_capability", int64_t{needs.min_compute_capability})
      .bind(":needs_priority", int64_t{needs.priority})
      .bind(":needs_preemptible", int64_t{needs.preemptible});
  return needs.min_loss_scale ? statement.bind_real(":needs_min_loss_scale", *needs.min_loss_scale)
                              : statement.bind_null(":needs_min_loss_scale");
}

const std::string kJobColumns = select_jobs(/*with_texts=*/true, /*with_needs=*/true);

JobRecord read_job(const SqliteStatement& row) {
  JobRecord job;
  job.id = row.column_text("id");
  job.name = row.column_text("name");
  job.state = static_cast<v1::JobState>(row.column_int64("state"));
  job.spec_yaml = row.column_text("spec_yaml");
  job.steps = row.column_int64("steps");
  job.attempt = static_cast<int32_t>(row.column_int64("attempt"));
  job.message = row.column_text("message");
  job.created_unix_ms = row.column_int64("created_ms");
  job.updated_unix_ms = row.column_int64("updated_ms");
  job.restarts = static_cast<int32_t>(row.column_int64("restarts"));
  // A job that never ran has none: not parsed (a pass reads thousands).
  if (const std::string progress = row.column_text("progress");
      !progress.empty() &&
      !google::protobuf::util::JsonStringToMessage(progress, &job.progress).ok()) {
    job.progress.Clear();
  }
  job.progress.set_steps(job.steps);
  job.summary_json = row.column_text("summary_json");
  if (!row.column_is_null("needs_workers") && !row.column_is_null("needs_configurations") &&
      !row.column_is_null("needs_priority")) {
    try {
      job.needs = JobNeeds{
          .workers = static_cast<int32_t>(row.column_int64("needs_workers")),
          .backend = static_cast<config::BackendChoice>(row.column_int64("needs_backend")),
          .max_restarts = static_cast<int32_t>(row.column_int64("needs_max_restarts")),
          .priority = static_cast<int32_t>(row.column_int64("needs_priority")),
          .preemptible = row.column_int64("needs_preemptible") != 0,
          .configurations = configurations_from_json(row.column_text("needs_configurations")),
          .min_loss_scale = row.column_is_null("needs_min_loss_scale")
                                ? std::nullopt
                                : std::optional(row.column_double("needs_min_loss_scale")),
          .min_compute_capability =
              static_cast<int32_t>(row.column_int64("needs_min_compute_capability"))};
    } catch (const EngineError&) {  // damaged: kept without needs, as unparsable
      job.needs.reset();
    }
  }
  if (!row.column_is_null("spec_json")) job.spec_json = row.column_text("spec_json");
  job.configuration = row.column_text("configuration");
  return job;
}

JobEventRecord read_event(const SqliteStatement& row) {
  return {row.column_int64("unix_ms"), static_cast<v1::JobState>(row.column_int64("state")),
          row.column_text("message")};
}

AttemptRecord read_attempt(const SqliteStatement& row) {
  return {static_cast<int32_t>(row.column_int64("attempt")), row.column_int64("started_ms"),
          row.column_int64("ended_ms"), static_cast<v1::JobState>(row.column_int64("outcome"))};
}

LogRecord read_log(const SqliteStatement& row) {
  return {static_cast<int32_t>(row.column_int64("attempt")),
          static_cast<int32_t>(row.column_int64("rank")), row.column_int64("unix_ms"),
          row.column_text("text"), row.column_int64("seq")};
}

// Every row that the bound `statement` selects, each converted by `read`.
template <typename Read>
auto read_rows(SqliteStatement& statement, Read read)
    -> absl::StatusOr<std::vector<decltype(read(std::declval<const SqliteStatement&>()))>> {
  std::vector<decltype(read(statement))> rows;
  while (true) {
    ASSIGN_OR_RETURN(has_row, statement.step());
    if (!has_row) return rows;
    rows.push_back(read(statement));
  }
}

// Every row that `sql` selects, each converted by `read`; `job_id` fills
// the statement's parameter when it has one.
template <typename Read>
auto select_rows(SqliteDb& db, std::string_view sql, std::string_view job_id, Read read)
    -> absl::StatusOr<std::vector<decltype(read(std::declval<const SqliteStatement&>()))>> {
  ASSIGN_OR_RETURN(statement, db.prepare(sql));
  statement.bind(1, job_id);
  return read_rows(statement, read);
}

// Sets the job's workers: those of its latest attempt, by rank.
absl::Status fill_workers(SqliteDb& db, JobRecord& job) {
  ASSIGN_OR_RETURN(select, db.prepare("SELECT worker_id FROM assignments WHERE job_id = ? "
                                      "AND attempt = ? ORDER BY rank"));
  select.bind(1, job.id).bind(2, job.attempt);
  job.workers.clear();
  while (true) {
    ASSIGN_OR_RETURN(has_row, select.step());
    if (!has_row) return absl::OkStatus();
    job.workers.push_back(select.column_text(0));
  }
}

absl::StatusOr<JobRecord> read_stored_job(SqliteDb& db, std::string_view id) {
  ASSIGN_OR_RETURN(select, db.prepare(std::string(kJobColumns) + "WHERE id = ?"));
  select.bind(1, id);
  ASSIGN_OR_RETURN(has_row, select.step());
  if (!has_row) return absl::NotFoundError("no job with id '" + std::string(id) + "'");
  JobRecord job = read_job(select);
  RETURN_IF_ERROR(fill_workers(db, job));
  return job;
}

// Stores the needs and the resolved spec of each queued or running job
// stored before they had columns, parsing its YAML this once. A spec that
// no longer parses keeps none; the scheduler says so on the job.
absl::Status fill_missing_resolution(SqliteDb& db) {
  ASSIGN_OR_RETURN(
      missing,
      select_rows(db,
                  "SELECT id, spec_yaml FROM jobs WHERE (needs_workers IS NULL OR spec_json IS "
                  "NULL OR needs_min_compute_capability IS NULL OR needs_configurations IS NULL OR "
                  "needs_priority IS NULL) "
                  "AND state IN (" +
                      kActiveStates + ")",
                  "", [](const SqliteStatement& row) {
                    return std::pair(row.column_text("id"), row.column_text("spec_yaml"));
                  }));
  for (const auto& [id, spec_yaml] : missing) {
    const jobspec::JobSpecResult parsed = jobspec::parse_job_spec(spec_yaml, "job.yaml");
    if (!parsed.ok()) continue;
    JobNeeds needs;
    try {
      needs = job_needs(*parsed.spec);
    } catch (const EngineError&) {  // too large to plan: kept without needs, as unparsable
      continue;
    }
    ASSIGN_OR_RETURN(update, db.prepare("UPDATE jobs SET " + assignments_of(kNeedsColumnNames) +
                                        ", spec_json = :spec_json WHERE id = :id"));
    RETURN_IF_ERROR(bind_needs(update, needs)
                        .bind(":spec_json", dump_json(config::job_spec_to_json(*parsed.spec)))
                        .bind(":id", id)
                        .run());
  }
  return absl::OkStatus();
}

}  // namespace

bool is_legal_transition(v1::JobState from, v1::JobState to) {
  switch (from) {
    case v1::JOB_STATE_QUEUED:
      return to == v1::JOB_STATE_RUNNING || to == v1::JOB_STATE_CANCELLED;
    case v1::JOB_STATE_RUNNING:
      return to == v1::JOB_STATE_SUCCEEDED || to == v1::JOB_STATE_FAILED ||
             to == v1::JOB_STATE_CANCELLED || to == v1::JOB_STATE_QUEUED ||
             to == v1::JOB_STATE_PREEMPTED;
    case v1::JOB_STATE_PREEMPTED:
      return to == v1::JOB_STATE_SUCCEEDED || to == v1::JOB_STATE_FAILED ||
             to == v1::JOB_STATE_CANCELLED || to == v1::JOB_STATE_QUEUED;
    default:
      return false;
  }
}

absl::StatusOr<std::unique_ptr<JobDatabase>> JobDatabase::open(const std::string& path,
                                                               const JobDatabaseOptions& options) {
  ASSIGN_OR_RETURN(db, SqliteDb::open(path));
  RETURN_IF_ERROR(migrate_job_schema(*db));
  RETURN_IF_ERROR(fill_missing_resolution(*db));
  struct stat opened {};
  if (stat(path.c_str(), &opened) != 0) {
    return absl::InternalError("cannot stat the job database " + path + ": " +
                               std::strerror(errno));
  }
  ASSIGN_OR_RETURN(reader, SqliteDb::open(path));
  return std::unique_ptr<JobDatabase>(
      new JobDatabase(std::move(db), std::move(reader), options,
                      {path, uint64_t(opened.st_dev), uint64_t(opened.st_ino)}));
}

absl::Status JobDatabase::check_file_locked() {
  struct stat now {};
  if (stat(file_.path.c_str(), &now) == 0 && uint64_t(now.st_dev) == file_.device &&
      uint64_t(now.st_ino) == file_.inode) {
    return absl::OkStatus();
  }
  return absl::DataLossError(
      "the job database " + file_.path +
      " was deleted or replaced while the coordinator ran; it records nothing more (what it "
      "wrote would be lost): restore the file or restart the coordinator");
}

absl::StatusOr<SqliteTransaction> JobDatabase::begin_write_locked() {
  RETURN_IF_ERROR(check_file_locked());
  return SqliteTransaction::begin(*db_);
}

absl::StatusOr<JobRecord> JobDatabase::create_job(std::string_view name, std::string_view spec_yaml,
                                                  std::string_view spec_json, int64_t steps,
                                                  const JobNeeds& needs) {
  absl::ReleasableMutexLock lock(&mu_);
  const int64_t now = now_unix_ms();
  const std::string id = random_id("", 16);
  ASSIGN_OR_RETURN(tx, begin_write_locked());
  static const std::string kInsert = [] {
    std::vector<const char*> columns = {"id",         "name",     "state",   "spec_yaml",
                                        "steps",      "attempt",  "message", "created_ms",
                                        "updated_ms", "spec_json"};
    columns.insert(columns.end(), std::begin(kNeedsColumnNames), std::end(kNeedsColumnNames));
    return insert_job(columns);
  }();
  ASSIGN_OR_RETURN(insert, db_->prepare(kInsert));
  insert.bind(":id", id)
      .bind(":name", name)
      .bind(":state", int64_t{v1::JOB_STATE_QUEUED})
      .bind(":spec_yaml", spec_yaml)
      .bind(":steps", steps)
      .bind(":attempt", int64_t{0})
      .bind(":message", "")
      .bind(":created_ms", now)
      .bind(":updated_ms", now)
      .bind(":spec_json", spec_json);
  RETURN_IF_ERROR(bind_needs(insert, needs).run());
  RETURN_IF_ERROR(add_event_locked(id, v1::JOB_STATE_QUEUED, "submitted", now));
  RETURN_IF_ERROR(tx.commit());
  absl::StatusOr<JobRecord> job = read_stored_job(*db_, id);
  lock.Release();
  notify_job_changed(id);
  return job;
}

absl::StatusOr<JobRecord> JobDatabase::get_job(std::string_view id) {
  absl::MutexLock lock(&read_mu_);
  return read_stored_job(*reader_, id);
}

void JobDatabase::notify_job_changed(std::string_view id) {
  if (JobDatabaseListener* listener = listener_.load()) listener->job_changed(std::string(id));
}

absl::StatusOr<std::vector<ListedJob>> JobDatabase::list_jobs(const JobListing& listing) {
  std::string where = "WHERE rowid < ?";
  if (!listing.states.empty()) {
    where += " AND state IN (";
    for (size_t i = 0; i < listing.states.size(); ++i) {
      where += (i == 0 ? "" : ", ") + std::to_string(int64_t{listing.states[i]});
    }
    where += ")";
  }
  absl::MutexLock lock(&read_mu_);
  ASSIGN_OR_RETURN(select, reader_->prepare(select_jobs(/*with_texts=*/false, /*with_needs=*/true,
                                                        "rowid AS listed_rowid") +
                                            where + " ORDER BY rowid DESC LIMIT ?"));
  select.bind(1, listing.before > 0 ? listing.before : std::numeric_limits<int64_t>::max())
      .bind(2, listing.limit);
  ASSIGN_OR_RETURN(jobs, read_rows(select, [](const SqliteStatement& row) {
                     return ListedJob{read_job(row), row.column_int64("listed_rowid")};
                   }));
  for (ListedJob& listed : jobs) RETURN_IF_ERROR(fill_workers(*reader_, listed.job));
  return jobs;
}

absl::StatusOr<std::optional<JobNeeds>> JobDatabase::stored_needs(std::string_view id) {
  absl::MutexLock lock(&read_mu_);
  ASSIGN_OR_RETURN(select, reader_->prepare(select_jobs(/*with_texts=*/false, /*with_needs=*/true,
                                                        "spec_json IS NOT NULL AS has_spec") +
                                            "WHERE id = ?"));
  select.bind(1, id);
  ASSIGN_OR_RETURN(has_row, select.step());
  if (!has_row) return absl::NotFoundError("no job with id '" + std::string(id) + "'");
  const bool has_spec = select.column_int64("has_spec") != 0;
  return has_spec ? read_job(select).needs : std::nullopt;
}

absl::StatusOr<std::vector<JobRecord>> JobDatabase::list_active_jobs() {
  absl::MutexLock lock(&read_mu_);
  ASSIGN_OR_RETURN(jobs, select_rows(*reader_,
                                     select_jobs(/*with_texts=*/false, /*with_needs=*/false) +
                                         "WHERE state IN (" + kActiveStates + ") ORDER BY rowid",
                                     "", read_job));
  for (JobRecord& job : jobs) {
    if (job.attempt > 0) RETURN_IF_ERROR(fill_workers(*reader_, job));  // never started: none
  }
  return jobs;
}

absl::StatusOr<std::map<v1::JobState, int64_t>> JobDatabase::count_jobs_by_state() {
  absl::MutexLock lock(&read_mu_);
  ASSIGN_OR_RETURN(
      rows, select_rows(*reader_, "SELECT state, COUNT(*) AS jobs FROM jobs GROUP BY state", "",
                        [](const SqliteStatement& row) {
                          return std::make_pair(
                              static_cast<v1::JobState>(row.column_int64("state")),
                              row.column_int64("jobs"));
                        }));
  return std::map<v1::JobState, int64_t>(rows.begin(), rows.end());
}

absl::StatusOr<JobRecord> JobDatabase::transition(std::string_view id, v1::JobState to,
                                                  std::string_view message,
                                                  const TransitionDetails& details) {
  absl::ReleasableMutexLock lock(&mu_);
  const int64_t now = now_unix_ms();
  ASSIGN_OR_RETURN(tx, begin_write_locked());
  ASSIGN_OR_RETURN(job, read_stored_job(*db_, id));
  if (!is_legal_transition(job.state, to)) {
    return absl::FailedPreconditionError("job '" + job.id + "' is " + v1::JobState_Name(job.state) +
                                         ", it cannot become " + v1::JobState_Name(to));
  }
  const int32_t attempt = job.attempt + (to == v1::JOB_STATE_RUNNING ? 1 : 0);
  // A failed attempt spends a restart whether it was running or stopping
  // for a preemption; a preempted job that stopped as asked does not.
  const int32_t restarts =
      job.restarts + (to == v1::JOB_STATE_QUEUED && details.spends_restart ? 1 : 0);
  ASSIGN_OR_RETURN(update,
                   db_->prepare("UPDATE jobs SET state = :state, attempt = :attempt, "
                                "message = :message, updated_ms = :updated_ms, "
                                "restarts = :restarts, summary_json = CASE WHEN :summary_json = '' "
                                "THEN summary_json ELSE :summary_json END, configuration = CASE "
                                "WHEN :starts THEN :configuration ELSE configuration END "
                                "WHERE id = :id"));
  RETURN_IF_ERROR(update.bind(":state", int64_t{to})
                      .bind(":attempt", attempt)
                      .bind(":message", message)
                      .bind(":updated_ms", now)
                      .bind(":restarts", restarts)
                      .bind(":summary_json", details.summary_json)
                      .bind(":starts", int64_t{to == v1::JOB_STATE_RUNNING})
                      .bind(":configuration", details.configuration)
                      .bind(":id", id)
                      .run());
  if (to == v1::JOB_STATE_RUNNING) {
    ASSIGN_OR_RETURN(start, db_->prepare("INSERT INTO attempts(job_id, attempt, started_ms) "
                                         "VALUES(?, ?, ?)"));
    RETURN_IF_ERROR(start.bind(1, id).bind(2, attempt).bind(3, now).run());
    for (size_t rank = 0; rank < details.workers.size(); ++rank) {
      ASSIGN_OR_RETURN(assign, db_->prepare("INSERT INTO assignments VALUES(?, ?, ?, ?)"));
      RETURN_IF_ERROR(assign.bind(1, id)
                          .bind(2, attempt)
                          .bind(3, static_cast<int64_t>(rank))
                          .bind(4, details.workers[rank])
                          .run());
    }
  } else if (to != v1::JOB_STATE_PREEMPTED &&
             (job.state == v1::JOB_STATE_RUNNING || job.state == v1::JOB_STATE_PREEMPTED)) {
    ASSIGN_OR_RETURN(end, db_->prepare("UPDATE attempts SET ended_ms = ?, outcome = ? "
                                       "WHERE job_id = ? AND attempt = ?"));
    RETURN_IF_ERROR(end.bind(1, now).bind(2, int64_t{to}).bind(3, id).bind(4, attempt).run());
  }
  RETURN_IF_ERROR(add_event_locked(id, to, message, now));
  RETURN_IF_ERROR(tx.commit());
  absl::StatusOr<JobRecord> changed = read_stored_job(*db_, id);
  lock.Release();
  notify_job_changed(id);
  return changed;
}

absl::Status JobDatabase::update_column_locked(std::string_view sql, std::string_view value,
                                               std::string_view id) {
  RETURN_IF_ERROR(check_file_locked());
  ASSIGN_OR_RETURN(update, db_->prepare(sql));
  RETURN_IF_ERROR(update.bind(1, value).bind(2, now_unix_ms()).bind(3, id).run());
  ASSIGN_OR_RETURN(changes, db_->prepare("SELECT changes()"));
  ASSIGN_OR_RETURN(has_row, changes.step());
  if (!has_row || changes.column_int64(0) == 0) {
    return absl::NotFoundError("no job with id '" + std::string(id) + "'");
  }
  return absl::OkStatus();
}

absl::Status JobDatabase::set_message(std::string_view id, std::string_view message) {
  return update_job_column("UPDATE jobs SET message = ?1, updated_ms = ?2 WHERE id = ?3", message,
                           id);
}

absl::Status JobDatabase::set_progress(std::string_view id, const v1::Progress& progress) {
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(progress, &json).ok()) {
    return absl::InternalError("cannot encode the progress of job '" + std::string(id) + "'");
  }
  return update_job_column("UPDATE jobs SET progress = ?1, updated_ms = ?2 WHERE id = ?3", json,
                           id);
}

absl::Status JobDatabase::update_job_column(std::string_view sql, std::string_view value,
                                            std::string_view id) {
  absl::ReleasableMutexLock lock(&mu_);
  RETURN_IF_ERROR(update_column_locked(sql, value, id));
  lock.Release();
  notify_job_changed(id);
  return absl::OkStatus();
}

absl::Status JobDatabase::add_event_locked(std::string_view id, v1::JobState state,
                                           std::string_view message, int64_t now_ms) {
  ASSIGN_OR_RETURN(insert, db_->prepare("INSERT INTO events(job_id, unix_ms, state, message) "
                                        "VALUES(?, ?, ?, ?)"));
  return insert.bind(1, id).bind(2, now_ms).bind(3, int64_t{state}).bind(4, message).run();
}

absl::StatusOr<std::vector<JobEventRecord>> JobDatabase::events(std::string_view id) {
  absl::MutexLock lock(&read_mu_);
  return select_rows(*reader_,
                     "SELECT unix_ms, state, message FROM events "
                     "WHERE job_id = ? ORDER BY seq",
                     id, read_event);
}

absl::StatusOr<std::vector<AttemptRecord>> JobDatabase::attempts(std::string_view id) {
  absl::MutexLock lock(&read_mu_);
  return select_rows(*reader_,
                     "SELECT attempt, started_ms, ended_ms, outcome "
                     "FROM attempts WHERE job_id = ? ORDER BY attempt",
                     id, read_attempt);
}

absl::Status JobDatabase::append_log(std::string_view id, int32_t attempt, int32_t rank,
                                     std::string_view text) {
  absl::ReleasableMutexLock lock(&mu_);
  ASSIGN_OR_RETURN(tx, begin_write_locked());
  RETURN_IF_ERROR(read_stored_job(*db_, id).status());
  LogRecord line{attempt, rank, now_unix_ms(), std::string(text)};
  ASSIGN_OR_RETURN(previous,
                   db_->prepare("SELECT COALESCE(MAX(seq), 0) FROM logs WHERE job_id = ?"));
  RETURN_IF_ERROR(previous.bind(1, id).step().status());
  const int64_t previous_seq = previous.column_int64(0);
  ASSIGN_OR_RETURN(insert, db_->prepare("INSERT INTO logs(job_id, attempt, rank, unix_ms, text) "
                                        "VALUES(?, ?, ?, ?, ?)"));
  RETURN_IF_ERROR(
      insert.bind(1, id).bind(2, attempt).bind(3, rank).bind(4, line.unix_ms).bind(5, text).run());
  ASSIGN_OR_RETURN(seq, db_->prepare("SELECT last_insert_rowid()"));
  RETURN_IF_ERROR(seq.step().status());
  line.seq = seq.column_int64(0);
  ASSIGN_OR_RETURN(trim, db_->prepare("DELETE FROM logs WHERE job_id = ?1 AND seq <= "
                                      "(SELECT seq FROM logs WHERE job_id = ?1 "
                                      "ORDER BY seq DESC LIMIT 1 OFFSET ?2)"));
  RETURN_IF_ERROR(trim.bind(1, id).bind(2, options_.log_tail_lines).run());
  RETURN_IF_ERROR(tx.commit());
  lock.Release();
  if (JobDatabaseListener* listener = listener_.load())
    listener->log_appended(std::string(id), line, previous_seq);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LogRecord>> JobDatabase::logs(std::string_view id, int64_t after_seq,
                                                         int64_t limit) {
  absl::MutexLock lock(&read_mu_);
  ASSIGN_OR_RETURN(select, reader_->prepare("SELECT attempt, rank, unix_ms, text, seq FROM logs "
                                            "WHERE job_id = ? AND seq > ? ORDER BY seq LIMIT ?"));
  select.bind(1, id).bind(2, after_seq).bind(3, limit);
  return read_rows(select, read_log);
}

absl::StatusOr<int64_t> JobDatabase::delete_finished_jobs(const FinishedJobRetention& retention,
                                                          int64_t max_rows) {
  const std::string finished = std::to_string(v1::JOB_STATE_SUCCEEDED) + ", " +
                               std::to_string(v1::JOB_STATE_FAILED) + ", " +
                               std::to_string(v1::JOB_STATE_CANCELLED);
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(tx, begin_write_locked());
  // The newest keep_newest finished jobs stay; past them, every one goes.
  ASSIGN_OR_RETURN(
      select,
      db_->prepare("SELECT id FROM jobs WHERE state IN (" + finished +
                   ") AND (updated_ms < ?1 OR rowid <= (SELECT rowid FROM jobs WHERE "
                   "state IN (" +
                   finished + ") ORDER BY rowid DESC LIMIT 1 OFFSET ?2)) ORDER BY rowid LIMIT ?3"));
  select.bind(1, retention.ended_before_unix_ms)
      .bind(2,
            retention.keep_newest > 0 ? retention.keep_newest : std::numeric_limits<int64_t>::max())
      .bind(3, max_rows);
  ASSIGN_OR_RETURN(
      ids, read_rows(select, [](const SqliteStatement& row) { return row.column_text(0); }));
  int64_t rows = 0;
  for (const std::string& id : ids) {
    // A job's log may hold thousands of lines: at most what is left of
    // max_rows goes now, and the job itself only once its log is gone.
    const int64_t left = max_rows - rows;
    ASSIGN_OR_RETURN(trim, db_->prepare("DELETE FROM logs WHERE seq IN (SELECT seq FROM logs "
                                        "WHERE job_id = ? ORDER BY seq LIMIT ?)"));
    RETURN_IF_ERROR(trim.bind(1, id).bind(2, left).run());
    ASSIGN_OR_RETURN(changes, db_->prepare("SELECT changes()"));
    RETURN_IF_ERROR(changes.step().status());
    rows += changes.column_int64(0);
    if (changes.column_int64(0) == left) break;  // lines may be left: a later call
    for (const char* table : {"events", "attempts", "assignments", "jobs"}) {
      const std::string column = std::string_view(table) == "jobs" ? "id" : "job_id";
      ASSIGN_OR_RETURN(
          remove, db_->prepare("DELETE FROM " + std::string(table) + " WHERE " + column + " = ?"));
      RETURN_IF_ERROR(remove.bind(1, id).run());
    }
    if (++rows >= max_rows) break;
  }
  RETURN_IF_ERROR(tx.commit());
  return rows;
}

absl::StatusOr<int64_t> JobDatabase::seq_before_last(std::string_view id, int64_t lines) {
  absl::MutexLock lock(&read_mu_);
  ASSIGN_OR_RETURN(select, reader_->prepare("SELECT seq FROM logs WHERE job_id = ? "
                                            "ORDER BY seq DESC LIMIT 1 OFFSET ?"));
  select.bind(1, id).bind(2, lines);
  ASSIGN_OR_RETURN(has_row, select.step());
  return has_row ? select.column_int64(0) : 0;
}

}  // namespace mixtrain::server
