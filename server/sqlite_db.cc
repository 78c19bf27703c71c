// Why: see sqlite_db.h.
#include "server/sqlite_db.h"

#include <algorithm>
#include <string>
#include <utility>

namespace mixtrain::server {
namespace {

// The error of the last call on `db`, naming the statement by its start
// (a schema is pages of SQL). A busy or locked database is UNAVAILABLE:
// it passes, so callers retry; anything else is INTERNAL.
absl::Status sqlite_error(sqlite3* db, std::string_view sql) {
  constexpr size_t kShown = 48;
  sql.remove_prefix(std::min(sql.find_first_not_of(" \n"), sql.size()));
  std::string what(sql.substr(0, std::min(sql.find('\n'), kShown)));
  if (what.size() < sql.size()) what += "...";
  const std::string message = what + ": " + sqlite3_errmsg(db);
  const int code = sqlite3_extended_errcode(db) & 0xff;
  return code == SQLITE_BUSY || code == SQLITE_LOCKED ? absl::UnavailableError(message)
                                                      : absl::InternalError(message);
}

}  // namespace

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : db_(other.db_),
      stmt_(std::exchange(other.stmt_, nullptr)),
      missing_parameter_(std::move(other.missing_parameter_)),
      columns_(std::move(other.columns_)) {}

SqliteStatement::~SqliteStatement() { sqlite3_finalize(stmt_); }

SqliteStatement& SqliteStatement::bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

SqliteStatement& SqliteStatement::bind(int index, std::string_view value) {
  sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  return *this;
}

SqliteStatement& SqliteStatement::bind_real(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}

SqliteStatement& SqliteStatement::bind_null(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

int SqliteStatement::parameter(std::string_view name) {
  const int index = sqlite3_bind_parameter_index(stmt_, std::string(name).c_str());
  if (index == 0 && missing_parameter_.empty()) missing_parameter_ = name;
  return index;
}

SqliteStatement& SqliteStatement::bind(std::string_view name, int64_t value) {
  return bind(parameter(name), value);
}

SqliteStatement& SqliteStatement::bind(std::string_view name, std::string_view value) {
  return bind(parameter(name), value);
}

SqliteStatement& SqliteStatement::bind_real(std::string_view name, double value) {
  return bind_real(parameter(name), value);
}

SqliteStatement& SqliteStatement::bind_null(std::string_view name) {
  return bind_null(parameter(name));
}

int SqliteStatement::column(std::string_view name) const {
  if (columns_.empty()) {
    const int count = sqlite3_column_count(stmt_);
    for (int i = 0; i < count; ++i) columns_.emplace(sqlite3_column_name(stmt_, i), i);
  }
  const auto found = columns_.find(name);
  return found == columns_.end() ? -1 : found->second;
}

absl::StatusOr<bool> SqliteStatement::step() {
  if (!missing_parameter_.empty()) {
    return absl::InternalError(std::string(sqlite3_sql(stmt_)).substr(0, 48) +
                               "...: no parameter " + missing_parameter_);
  }
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return sqlite_error(db_, sqlite3_sql(stmt_));
}

absl::Status SqliteStatement::run() { return step().status(); }

// A column index of -1 (a name the statement lacks) reads as NULL.
int64_t SqliteStatement::column_int64(int index) const {
  return index < 0 ? 0 : sqlite3_column_int64(stmt_, index);
}

std::string SqliteStatement::column_text(int index) const {
  if (index < 0) return std::string();
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, index));
  return text == nullptr ? std::string() : std::string(text, sqlite3_column_bytes(stmt_, index));
}

double SqliteStatement::column_double(int index) const {
  return index < 0 ? 0.0 : sqlite3_column_double(stmt_, index);
}

bool SqliteStatement::column_is_null(int index) const {
  return index < 0 || sqlite3_column_type(stmt_, index) == SQLITE_NULL;
}

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::open(const std::string& path) {
  sqlite3* handle = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  std::unique_ptr<SqliteDb> db(new SqliteDb(handle));
  if (rc != SQLITE_OK) return sqlite_error(handle, "cannot open " + path);
  // Only another process (a backup, an operator's shell) holds the lock:
  // a write waits briefly, then its caller retries (UNAVAILABLE). No
  // other lock is held meanwhile but the store's own writer's: the
  // scheduler commits after releasing its lock, and reads use their own
  // connection, which WAL lets read while another writes.
  sqlite3_busy_timeout(handle, 1000);
  if (absl::Status s = db->exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                                "PRAGMA foreign_keys=ON;");
      !s.ok()) {
    return s;
  }
  return db;
}

SqliteDb::~SqliteDb() { sqlite3_close(db_); }

absl::Status SqliteDb::exec(const char* sql) {
  if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return sqlite_error(db_, sql);
  }
  return absl::OkStatus();
}

absl::StatusOr<SqliteStatement> SqliteDb::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) !=
      SQLITE_OK) {
    return sqlite_error(db_, sql);
  }
  return SqliteStatement(db_, stmt);
}

absl::StatusOr<SqliteTransaction> SqliteTransaction::begin(SqliteDb& db) {
  if (absl::Status s = db.exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  return SqliteTransaction(&db);
}

SqliteTransaction::~SqliteTransaction() {
  if (db_ != nullptr) db_->exec("ROLLBACK").IgnoreError();
}

absl::Status SqliteTransaction::commit() {
  absl::Status s = db_->exec("COMMIT");
  if (s.ok()) db_ = nullptr;
  return s;
}

}  // namespace mixtrain::server
