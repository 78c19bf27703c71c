// Why: the job database needs only a handful of SQLite calls; this thin RAII
// layer turns them into absl::Status values and frees handles on every path,
// so job_database.cc reads as SQL and not as sqlite3_* bookkeeping.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

namespace mixtrain::server {

// One prepared statement. Parameters are numbered from 1 or named
// (":name"), columns numbered from 0 or named by their result name (the
// column's, or its AS alias).
class SqliteStatement {
 public:
  SqliteStatement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  SqliteStatement(SqliteStatement&& other) noexcept;
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;
  ~SqliteStatement();

  SqliteStatement& bind(int index, int64_t value);
  SqliteStatement& bind(int index, std::string_view value);  // copied by SQLite
  SqliteStatement& bind_real(int index, double value);
  SqliteStatement& bind_null(int index);
  // The same by parameter name. A name the statement does not have fails
  // its next step() (INTERNAL, naming it).
  SqliteStatement& bind(std::string_view name, int64_t value);
  SqliteStatement& bind(std::string_view name, std::string_view value);
  SqliteStatement& bind_real(std::string_view name, double value);
  SqliteStatement& bind_null(std::string_view name);

  // Runs to the next row: true when there is one, false when done.
  absl::StatusOr<bool> step();
  // step() for statements without results.
  absl::Status run();

  int64_t column_int64(int index) const;
  std::string column_text(int index) const;
  double column_double(int index) const;
  bool column_is_null(int index) const;
  // The same by result column name; a name the statement does not have
  // reads as NULL.
  int64_t column_int64(std::string_view name) const { return column_int64(column(name)); }
  std::string column_text(std::string_view name) const { return column_text(column(name)); }
  double column_double(std::string_view name) const { return column_double(column(name)); }
  bool column_is_null(std::string_view name) const { return column_is_null(column(name)); }

 private:
  // The index of result column `name`, or -1; the names are read from the
  // statement once, at the first lookup (a list reads thousands of rows).
  int column(std::string_view name) const;
  // The index of parameter `name`; records the error when there is none.
  int parameter(std::string_view name);

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  std::string missing_parameter_;  // the first name bound that the statement lacks
  mutable std::map<std::string, int, std::less<>> columns_;  // result column name -> index
};

// One connection; not thread safe (callers hold their own lock).
class SqliteDb {
 public:
  // Opens or creates the database at `path`, in WAL mode with foreign keys on.
  static absl::StatusOr<std::unique_ptr<SqliteDb>> open(const std::string& path);
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;
  ~SqliteDb();

  // Runs one or more statements that return no rows.
  absl::Status exec(const char* sql);
  absl::StatusOr<SqliteStatement> prepare(std::string_view sql);

 private:
  explicit SqliteDb(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

// BEGIN IMMEDIATE on construction; rolls back unless commit() succeeded.
class SqliteTransaction {
 public:
  static absl::StatusOr<SqliteTransaction> begin(SqliteDb& db);
  SqliteTransaction(SqliteTransaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  SqliteTransaction(const SqliteTransaction&) = delete;
  SqliteTransaction& operator=(const SqliteTransaction&) = delete;
  ~SqliteTransaction();

  absl::Status commit();

 private:
  explicit SqliteTransaction(SqliteDb* db) : db_(db) {}
  SqliteDb* db_;  // null once committed or rolled back
};

}  // namespace mixtrain::server
