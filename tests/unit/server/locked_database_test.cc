// Why: with the job database locked for a while (a backup, an operator's
// sqlite3 shell) as a job finished, the SUCCEEDED transition failed, the
// error was ignored and the job stayed RUNNING forever (issue 13). The
// attempt must be kept until its state change commits, the change retried,
// and the worker told to retry what it sent meanwhile (UNAVAILABLE, which
// agents retry, not INTERNAL, which they drop).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <future>
#include <thread>

#include "cluster_fixture.h"

namespace mixtrain::server {
namespace {

using testing_support::ClusterTest;
using testing_support::rank_summary_json;
using testing_support::spec;

// Holds the write lock of the SQLite database at `path` for `duration`
// from another connection; `locked` is set once it holds it.
void hold_write_lock(const std::string& path, std::chrono::milliseconds duration,
                     std::promise<void>& locked) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  locked.set_value();
  std::this_thread::sleep_for(duration);
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(db);
}

TEST_F(ClusterTest, AJobFinishingWhileTheDatabaseIsLockedSucceedsOnceItIsFree) {
  auto rank = worker();
  const std::string id = submit(spec(1));
  const v1::Task task = rank->next_start();
  await_state(id, v1::JOB_STATE_RUNNING);

  // Longer than four busy timeouts (1 s each): the log line, the final
  // progress and the ending's retries all fail before the lock goes.
  std::promise<void> locked;
  std::thread holder(hold_write_lock, dir_.path("jobs.db"),
                     std::chrono::milliseconds(5'000), std::ref(locked));
  locked.get_future().wait();
  const grpc::Status log = rank->log(task, {"the last line"});
  EXPECT_EQ(log.error_code(), grpc::StatusCode::UNAVAILABLE) << log.error_message();
  EXPECT_NE(log.error_message().find("database is locked"), std::string::npos);
  EXPECT_TRUE(
      rank->report(task, v1::TASK_OUTCOME_SUCCEEDED, "", rank_summary_json(0), /*step=*/10).ok());
  holder.join();

  // Once the lock is gone the kept ending commits; the job ends right.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  v1::Job finished;
  while ((finished = job(id)).state() == v1::JOB_STATE_RUNNING &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(finished.state(), v1::JOB_STATE_SUCCEEDED) << finished.message();
  EXPECT_EQ(finished.progress().step(), 10);
  EXPECT_EQ(finished.summary_json(), rank_summary_json(0));
}

}  // namespace
}  // namespace mixtrain::server
