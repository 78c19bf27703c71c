// Why: a coordinator upgraded in place must find every job, event and log
// line its predecessor stored (issue 32). fixtures/jobs-before-versions.sql
// is the dump of a store written by the coordinator of commit fcab13f, the
// last without schema versions (five jobs: succeeded, queued, preempted,
// failed after a restart, cancelled; their events, attempts, workers and
// logs); it is loaded as that coordinator left it and opened by this one.
#include "server/job_schema.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "server/job_database.h"
#include "server/sqlite_db.h"
#include "test_support/temp_dir.h"

namespace mixtrain::server {
namespace {

using v1::JobState;

std::string fixture_sql() {
  std::ifstream file(std::string(MIXTRAIN_SOURCE_DIR) +
                     "/tests/unit/server/fixtures/jobs-before-versions.sql");
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

class JobSchemaTest : public testing::Test {
 protected:
  // The store of commit fcab13f at `name`, with `then` run on it after.
  std::string old_store(const std::string& name, const std::string& then = "") {
    const std::string path = dir_.path(name);
    std::unique_ptr<SqliteDb> db = *SqliteDb::open(path);
    EXPECT_TRUE(db->exec(fixture_sql().c_str()).ok());
    if (!then.empty()) {
      EXPECT_TRUE(db->exec(then.c_str()).ok());
    }
    return path;
  }
  // Every table's columns, as "table: name type, ...".
  static std::vector<std::string> schema_of(const std::string& path) {
    std::unique_ptr<SqliteDb> db = *SqliteDb::open(path);
    std::vector<std::string> tables;
    for (const char* table : {"jobs", "attempts", "events", "logs", "assignments"}) {
      SqliteStatement select =
          *db->prepare("SELECT name, type FROM pragma_table_info('" + std::string(table) + "')");
      std::string columns = table;
      while (*select.step()) {
        columns.append(" ").append(select.column_text("name"));
        columns.append(" ").append(select.column_text("type"));
      }
      tables.push_back(columns);
    }
    SqliteStatement indexes =
        *db->prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
                     "ORDER BY name");
    std::string names = "indexes";
    while (*indexes.step()) names.append(" ").append(indexes.column_text("name"));
    tables.push_back(names);
    return tables;
  }
  static int64_t user_version(const std::string& path) {
    std::unique_ptr<SqliteDb> db = *SqliteDb::open(path);
    SqliteStatement read = *db->prepare("PRAGMA user_version");
    EXPECT_TRUE(*read.step());
    return read.column_int64(0);
  }

  test_support::TempDir dir_;
};

TEST_F(JobSchemaTest, AStoreFromBeforeVersionsKeepsEveryJobEventAndLogLine) {
  const std::string path = old_store("old.db");
  absl::StatusOr<std::unique_ptr<JobDatabase>> opened = JobDatabase::open(path);
  ASSERT_TRUE(opened.ok()) << opened.status();
  JobDatabase& store = **opened;
  EXPECT_EQ(user_version(path), kJobSchemaVersion);

  const absl::StatusOr<std::vector<ListedJob>> listed = store.list_jobs();
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::map<std::string, JobRecord> by_name;
  for (const ListedJob& job : *listed) by_name[job.job.name] = *store.get_job(job.job.id);
  ASSERT_EQ(by_name.size(), 5u);
  const JobRecord& done = by_name["fixture-succeeded"];
  EXPECT_EQ(done.state, v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(done.attempt, 1);
  EXPECT_EQ(done.steps, 100);
  EXPECT_EQ(done.configuration, "zero.stage 2");
  EXPECT_EQ(done.summary_json, R"({"status":"succeeded","steps":100})");
  EXPECT_EQ(done.progress.step(), 100);
  EXPECT_EQ(done.progress.train_loss(), 1.25);
  EXPECT_EQ(done.workers, (std::vector<std::string>{"w-a", "w-b"}));
  ASSERT_TRUE(done.needs.has_value());
  EXPECT_EQ(done.needs->workers, 2);
  EXPECT_EQ(done.needs->max_restarts, 3);
  EXPECT_EQ(done.needs->priority, 7);
  EXPECT_TRUE(done.needs->preemptible);
  EXPECT_FALSE(done.needs->configurations.empty());
  EXPECT_NE(done.spec_json.find("\"workers\""), std::string::npos);
  EXPECT_EQ(by_name["fixture-queued"].state, v1::JOB_STATE_QUEUED);
  EXPECT_EQ(by_name["fixture-preempted"].state, v1::JOB_STATE_PREEMPTED);
  EXPECT_EQ(by_name["fixture-cancelled"].state, v1::JOB_STATE_CANCELLED);
  const JobRecord& failed = by_name["fixture-failed"];
  EXPECT_EQ(failed.state, v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.attempt, 2);
  EXPECT_EQ(failed.restarts, 1);

  std::vector<std::string> messages;
  const absl::StatusOr<std::vector<JobEventRecord>> events = store.events(failed.id);
  for (const JobEventRecord& event : *events) messages.push_back(event.message);
  EXPECT_EQ(messages, (std::vector<std::string>{"submitted", "started on 2 workers",
                                                "rank 1 failed: restarting",
                                                "started on 2 workers", "rank 1 failed"}));
  const std::vector<AttemptRecord> attempts = *store.attempts(failed.id);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[1].outcome, v1::JOB_STATE_FAILED);
  std::vector<std::string> lines;
  const absl::StatusOr<std::vector<LogRecord>> logs = store.logs(done.id, 0, 100);
  for (const LogRecord& line : *logs) lines.push_back(line.text);
  EXPECT_EQ(lines, (std::vector<std::string>{"step 1/100 loss 4.17", "rank 1 ready",
                                             "step 100/100 loss 1.25"}));
  EXPECT_EQ(store.logs(failed.id, 0, 100)->at(0).text, "training failed: out of memory");

  // And it goes on as a store: the queued job starts, a new one is stored.
  ASSERT_TRUE(store.transition(by_name["fixture-queued"].id, v1::JOB_STATE_RUNNING, "started",
                               {.workers = {"w-c", "w-d"}})
                  .ok());
  EXPECT_TRUE(store.create_job("after", "name: after\n", "{}", 5, JobNeeds{}).ok());
}

// The releases between the single stored configuration and the list of
// them left its four columns behind: version 2 drops them, and the store
// ends with the very schema of one created now.
TEST_F(JobSchemaTest, MigrationDropsTheDeadColumnsAndEndsAtTheSchemaOfANewStore) {
  const std::string fresh = dir_.path("fresh.db");
  ASSERT_TRUE(JobDatabase::open(fresh).ok());
  const std::string older = old_store(
      "older.db",
      "ALTER TABLE jobs ADD COLUMN needs_zero_stage INTEGER; ALTER TABLE jobs ADD COLUMN "
      "needs_parameters REAL; ALTER TABLE jobs ADD COLUMN needs_device_bytes REAL; ALTER TABLE "
      "jobs ADD COLUMN needs_host_bytes REAL; UPDATE jobs SET needs_zero_stage = 2");
  EXPECT_NE(schema_of(older), schema_of(fresh));
  absl::StatusOr<std::unique_ptr<JobDatabase>> opened = JobDatabase::open(older);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(schema_of(older), schema_of(fresh));
  EXPECT_EQ((*opened)->list_jobs()->size(), 5u);
  EXPECT_EQ(user_version(fresh), kJobSchemaVersion);
}

// A store a later coordinator migrated further is not this one's to
// change: it is refused, naming both versions, and left as it was.
TEST_F(JobSchemaTest, AStoreOfANewerVersionIsRefusedUntouched) {
  const std::string path = old_store("newer.db", "PRAGMA user_version = 99");
  const std::vector<std::string> before = schema_of(path);
  const absl::StatusOr<std::unique_ptr<JobDatabase>> opened = JobDatabase::open(path);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(opened.status().message().find("schema version 99"), std::string::npos);
  EXPECT_NE(opened.status().message().find("up to " + std::to_string(kJobSchemaVersion)),
            std::string::npos);
  EXPECT_EQ(schema_of(path), before);
  EXPECT_EQ(user_version(path), 99);
}

// Statements name their columns and parameters: a name a statement lacks
// reads as NULL and fails the bind's step, never another column's value.
TEST_F(JobSchemaTest, NamesThatAStatementLacksAreNeverAnotherColumn) {
  std::unique_ptr<SqliteDb> db = *SqliteDb::open(dir_.path("names.db"));
  ASSERT_TRUE(db->exec("CREATE TABLE t(a INTEGER, b TEXT)").ok());
  SqliteStatement insert = *db->prepare("INSERT INTO t(a, b) VALUES(:a, :b)");
  EXPECT_TRUE(insert.bind(":b", "text").bind(":a", int64_t{7}).run().ok());
  SqliteStatement wrong = *db->prepare("INSERT INTO t(a, b) VALUES(:a, :b)");
  const absl::Status refused = wrong.bind(":a", int64_t{1}).bind(":c", "x").run();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInternal);
  EXPECT_NE(refused.message().find("no parameter :c"), std::string::npos);
  SqliteStatement select = *db->prepare("SELECT b, a AS alias FROM t");
  ASSERT_TRUE(*select.step());
  EXPECT_EQ(select.column_int64("alias"), 7);
  EXPECT_EQ(select.column_text("b"), "text");
  EXPECT_TRUE(select.column_is_null("a"));
  EXPECT_FALSE(*select.step());  // the refused insert stored nothing
  EXPECT_EQ(select_jobs(false, false).find(", spec_yaml,"), std::string::npos);
  EXPECT_NE(select_jobs(false, false).find("'' AS spec_yaml"), std::string::npos);
}

}  // namespace
}  // namespace mixtrain::server
