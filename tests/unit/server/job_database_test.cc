// Why: the job database is the coordinator's memory across crashes; these
// tests pin its state machine (legal moves only, each one atomic), the
// attempts and events it records, the bounded log tail, and that a store
// reopened on the same file sees everything.
#include "server/job_database.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <vector>

#include "engine/common/json.h"
#include "engine/config/job_spec_json.h"
#include "server/ids.h"
#include "server/sqlite_db.h"
#include "test_support/temp_dir.h"

namespace mixtrain::server {
namespace {

using v1::JobState;

class JobDatabaseTest : public testing::Test {
 protected:
  std::unique_ptr<JobDatabase> open_database(const JobDatabaseOptions& options = {}) {
    absl::StatusOr<std::unique_ptr<JobDatabase>> store =
        JobDatabase::open(dir_.path("jobs.db"), options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }
  JobRecord create(JobDatabase& store, const std::string& name) {
    absl::StatusOr<JobRecord> job =
        store.create_job(name, "name: " + name + "\n", "{}", 100, JobNeeds{});
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : JobRecord{};
  }
  void move(JobDatabase& store, const std::string& id, JobState to) {
    absl::StatusOr<JobRecord> job = store.transition(id, to, "to " + JobState_Name(to));
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->state, to);
  }

  test_support::TempDir dir_;
};

TEST_F(JobDatabaseTest, NewJobIsQueuedAndListedInSubmissionOrder) {
  auto store = open_database();
  const JobRecord first = create(*store, "first");
  const JobRecord second = create(*store, "second");
  EXPECT_EQ(first.state, v1::JOB_STATE_QUEUED);
  EXPECT_EQ(first.attempt, 0);
  EXPECT_EQ(first.steps, 100);
  EXPECT_EQ(first.spec_yaml, "name: first\n");
  EXPECT_NE(first.id, second.id);
  absl::StatusOr<std::vector<ListedJob>> jobs = store->list_jobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].job.name, "second");  // newest first
  EXPECT_EQ((*jobs)[1].job.name, "first");
}

// 60,000 jobs once took 3 s and 280 MB to list with their spec texts, and
// 200,000 did not fit in a response (issue 29): lists come a page at a
// time, without the texts.
TEST_F(JobDatabaseTest, JobsAreListedAPageAtATimeNewestFirstWithoutTheirTexts) {
  auto store = open_database();
  std::vector<std::string> ids;  // oldest first
  for (int i = 0; i < 5; ++i) ids.push_back(create(*store, "job" + std::to_string(i)).id);
  move(*store, ids[3], v1::JOB_STATE_CANCELLED);
  std::vector<std::string> listed;
  JobListing listing{.limit = 2};
  while (true) {
    const absl::StatusOr<std::vector<ListedJob>> page = store->list_jobs(listing);
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_LE(page->size(), 2u);
    for (const ListedJob& entry : *page) {
      listed.push_back(entry.job.id);
      EXPECT_TRUE(entry.job.spec_yaml.empty());
      EXPECT_TRUE(entry.job.spec_json.empty());
      EXPECT_TRUE(entry.job.needs.has_value());  // the priority is shown
    }
    if (page->size() < 2) break;
    listing.before = page->back().position;
  }
  EXPECT_EQ(listed, (std::vector<std::string>{ids[4], ids[3], ids[2], ids[1], ids[0]}));
  const absl::StatusOr<std::vector<ListedJob>> cancelled =
      store->list_jobs({.states = {v1::JOB_STATE_CANCELLED}});
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  ASSERT_EQ(cancelled->size(), 1u);
  EXPECT_EQ((*cancelled)[0].job.id, ids[3]);
}

// Finished jobs and their logs piled up forever (issue 29): those the
// retention does not keep go with everything stored about them; jobs
// still queued, running or preempted stay however old.
TEST_F(JobDatabaseTest, RetentionDeletesExpiredFinishedJobsWithTheirLogsAndNothingActive) {
  auto store = open_database();
  std::vector<std::string> finished;  // oldest first
  for (int i = 0; i < 4; ++i) {
    const std::string id = create(*store, "done" + std::to_string(i)).id;
    move(*store, id, v1::JOB_STATE_RUNNING);
    ASSERT_TRUE(store->append_log(id, 1, 0, "line").ok());
    move(*store, id, i % 2 == 0 ? v1::JOB_STATE_SUCCEEDED : v1::JOB_STATE_FAILED);
    finished.push_back(id);
  }
  const std::string queued = create(*store, "queued").id;
  const std::string running = create(*store, "running").id;
  move(*store, running, v1::JOB_STATE_RUNNING);
  const std::string preempted = create(*store, "preempted").id;
  move(*store, preempted, v1::JOB_STATE_RUNNING);
  move(*store, preempted, v1::JOB_STATE_PREEMPTED);
  {  // everything but the newest finished job ended (or last changed) 40 days ago
    auto sql = SqliteDb::open(dir_.path("jobs.db"));
    ASSERT_TRUE(sql.ok());
    ASSERT_TRUE(
        (*sql)->exec(("UPDATE jobs SET updated_ms = 1000 WHERE id != '" + finished[3] + "'").c_str())
            .ok());
  }
  const int64_t day_ms = int64_t{24} * 3600 * 1000;
  const FinishedJobRetention by_age{.ended_before_unix_ms = now_unix_ms() - 30 * day_ms};
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(store->append_log(finished[0], 1, 0, "more").ok());
  // 43 log lines and 3 jobs go, at most 5 rows per transaction.
  std::vector<int64_t> batches;
  while (true) {
    const absl::StatusOr<int64_t> deleted = store->delete_finished_jobs(by_age, 5);
    ASSERT_TRUE(deleted.ok()) << deleted.status();
    ASSERT_LE(*deleted, 5);
    if (*deleted == 0) break;
    batches.push_back(*deleted);
    ASSERT_LT(batches.size(), 100u);
  }
  EXPECT_EQ(std::accumulate(batches.begin(), batches.end(), int64_t{0}), 43 + 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(store->get_job(finished[i]).status().code(), absl::StatusCode::kNotFound);
    EXPECT_TRUE(store->logs(finished[i])->empty());
    EXPECT_TRUE(store->events(finished[i])->empty());
    EXPECT_TRUE(store->attempts(finished[i])->empty());
  }
  for (const std::string& id : {finished[3], queued, running, preempted}) {
    EXPECT_TRUE(store->get_job(id).ok()) << id;
  }
  EXPECT_EQ(store->logs(finished[3])->size(), 1u);

  // The count limit keeps the newest finished ones, and again no active one.
  const std::string last = create(*store, "last").id;
  move(*store, last, v1::JOB_STATE_CANCELLED);
  const absl::StatusOr<int64_t> deleted = store->delete_finished_jobs({.keep_newest = 1}, 100);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 2);  // finished[3] and its line
  EXPECT_EQ(store->get_job(finished[3]).status().code(), absl::StatusCode::kNotFound);
  for (const std::string& id : {last, queued, running, preempted}) {
    EXPECT_TRUE(store->get_job(id).ok()) << id;
  }
  EXPECT_EQ(*store->delete_finished_jobs({}, 100), 0);  // neither rule: keeps everything
}

// The scheduler's view: only QUEUED and RUNNING jobs, oldest first, with
// their workers; and the metrics page's counts per state.
TEST_F(JobDatabaseTest, ActiveJobsAreTheQueuedAndRunningOnesAndCountsCoverEveryState) {
  auto store = open_database();
  const JobRecord done = create(*store, "done");
  const JobRecord running = create(*store, "running");
  const JobRecord cancelled = create(*store, "cancelled");
  const JobRecord queued = create(*store, "queued");
  move(*store, done.id, v1::JOB_STATE_RUNNING);
  move(*store, done.id, v1::JOB_STATE_SUCCEEDED);
  ASSERT_TRUE(store->transition(running.id, v1::JOB_STATE_RUNNING, "", {.workers = {"w-a"}}).ok());
  move(*store, cancelled.id, v1::JOB_STATE_CANCELLED);
  const absl::StatusOr<std::vector<JobRecord>> active = store->list_active_jobs();
  ASSERT_TRUE(active.ok()) << active.status();
  ASSERT_EQ(active->size(), 2u);
  EXPECT_EQ((*active)[0].id, running.id);
  EXPECT_EQ((*active)[0].workers, (std::vector<std::string>{"w-a"}));
  EXPECT_EQ((*active)[1].id, queued.id);
  // A pass over thousands of queued jobs reads neither their specs nor
  // their needs (issue 29): the scheduler keeps those.
  EXPECT_TRUE((*active)[1].spec_yaml.empty());
  EXPECT_TRUE((*active)[1].spec_json.empty());
  EXPECT_FALSE((*active)[1].needs.has_value());
  const absl::StatusOr<std::map<JobState, int64_t>> counts = store->count_jobs_by_state();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(*counts, (std::map<JobState, int64_t>{{v1::JOB_STATE_QUEUED, 1},
                                                  {v1::JOB_STATE_RUNNING, 1},
                                                  {v1::JOB_STATE_SUCCEEDED, 1},
                                                  {v1::JOB_STATE_CANCELLED, 1}}));
}

TEST_F(JobDatabaseTest, UnknownJobIsNotFound) {
  auto store = open_database();
  EXPECT_EQ(store->get_job("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->transition("nope", v1::JOB_STATE_RUNNING, "").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(JobDatabaseTest, RestartRecordsEveryAttemptAndEvent) {
  auto store = open_database();
  const std::string id = create(*store, "job").id;
  move(*store, id, v1::JOB_STATE_RUNNING);
  move(*store, id, v1::JOB_STATE_QUEUED);  // a worker was lost
  move(*store, id, v1::JOB_STATE_RUNNING);
  move(*store, id, v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(store->get_job(id)->attempt, 2);

  absl::StatusOr<std::vector<AttemptRecord>> attempts = store->attempts(id);
  ASSERT_TRUE(attempts.ok()) << attempts.status();
  ASSERT_EQ(attempts->size(), 2u);
  EXPECT_EQ((*attempts)[0].attempt, 1);
  EXPECT_EQ((*attempts)[0].outcome, v1::JOB_STATE_QUEUED);
  EXPECT_GT((*attempts)[0].ended_unix_ms, 0);
  EXPECT_EQ((*attempts)[1].outcome, v1::JOB_STATE_SUCCEEDED);

  absl::StatusOr<std::vector<JobEventRecord>> events = store->events(id);
  ASSERT_TRUE(events.ok()) << events.status();
  std::vector<JobState> states;
  for (const JobEventRecord& event : *events) states.push_back(event.state);
  EXPECT_EQ(states, (std::vector<JobState>{v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING,
                                           v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING,
                                           v1::JOB_STATE_SUCCEEDED}));
  EXPECT_EQ(events->back().message, "to JOB_STATE_SUCCEEDED");
}

TEST_F(JobDatabaseTest, IllegalTransitionIsRefusedAndChangesNothing) {
  auto store = open_database();
  const JobRecord queued = create(*store, "job");
  absl::StatusOr<JobRecord> refused =
      store->transition(queued.id, v1::JOB_STATE_SUCCEEDED, "skipping RUNNING");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("JOB_STATE_QUEUED"), std::string::npos);
  EXPECT_EQ(store->get_job(queued.id)->state, v1::JOB_STATE_QUEUED);
  EXPECT_EQ(store->events(queued.id)->size(), 1u);

  move(*store, queued.id, v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(store->transition(queued.id, v1::JOB_STATE_RUNNING, "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store->attempts(queued.id)->empty());
}

TEST(JobStateMachine, OnlyTheDocumentedMovesAreLegal) {
  const std::vector<std::pair<JobState, JobState>> legal = {
      {v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING},
      {v1::JOB_STATE_QUEUED, v1::JOB_STATE_CANCELLED},
      {v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED},
      {v1::JOB_STATE_RUNNING, v1::JOB_STATE_FAILED},
      {v1::JOB_STATE_RUNNING, v1::JOB_STATE_CANCELLED},
      {v1::JOB_STATE_RUNNING, v1::JOB_STATE_QUEUED},
      {v1::JOB_STATE_RUNNING, v1::JOB_STATE_PREEMPTED},
      {v1::JOB_STATE_PREEMPTED, v1::JOB_STATE_QUEUED},
      {v1::JOB_STATE_PREEMPTED, v1::JOB_STATE_SUCCEEDED},
      {v1::JOB_STATE_PREEMPTED, v1::JOB_STATE_FAILED},
      {v1::JOB_STATE_PREEMPTED, v1::JOB_STATE_CANCELLED}};
  for (int from = v1::JobState_MIN; from <= v1::JobState_MAX; ++from) {
    for (int to = v1::JobState_MIN; to <= v1::JobState_MAX; ++to) {
      const std::pair<JobState, JobState> move{JobState(from), JobState(to)};
      const bool expected = std::find(legal.begin(), legal.end(), move) != legal.end();
      EXPECT_EQ(is_legal_transition(move.first, move.second), expected)
          << v1::JobState_Name(move.first) << " -> " << v1::JobState_Name(move.second);
    }
  }
}

TEST_F(JobDatabaseTest, LogKeepsOnlyTheNewestLinesOfEachJob) {
  auto store = open_database({.log_tail_lines = 3});
  const std::string a = create(*store, "a").id;
  const std::string b = create(*store, "b").id;
  ASSERT_TRUE(store->append_log(b, 1, 0, "b0").ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store->append_log(a, 1, i % 2, std::to_string(i)).ok());
  absl::StatusOr<std::vector<LogRecord>> lines = store->logs(a);
  ASSERT_TRUE(lines.ok()) << lines.status();
  std::vector<std::string> texts;
  for (const LogRecord& line : *lines) texts.push_back(line.text);
  EXPECT_EQ(texts, (std::vector<std::string>{"2", "3", "4"}));
  EXPECT_EQ((*lines)[0].rank, 0);
  EXPECT_EQ((*lines)[1].rank, 1);
  ASSERT_EQ(store->logs(b)->size(), 1u);
}

TEST_F(JobDatabaseTest, LogOfAnUnknownJobIsNotFound) {
  auto store = open_database();
  EXPECT_EQ(store->append_log("nope", 1, 0, "x").code(), absl::StatusCode::kNotFound);
}

TEST_F(JobDatabaseTest, AttemptsKeepTheirWorkersRestartsProgressAndSummary) {
  std::string id;
  {
    auto store = open_database();
    id = create(*store, "job").id;
    ASSERT_TRUE(store->transition(id, v1::JOB_STATE_RUNNING, "", {.workers = {"w-a", "w-b"}}).ok());
    ASSERT_TRUE(store->transition(id, v1::JOB_STATE_QUEUED, "failed", {.spends_restart = true}).ok());
    ASSERT_TRUE(store->transition(id, v1::JOB_STATE_RUNNING, "", {.workers = {"w-c"}}).ok());
    // Preempted and stopped as asked: requeued without spending a restart.
    ASSERT_TRUE(store->transition(id, v1::JOB_STATE_PREEMPTED, "").ok());
    ASSERT_TRUE(store->transition(id, v1::JOB_STATE_QUEUED, "preempted").ok());
    ASSERT_TRUE(store->transition(id, v1::JOB_STATE_RUNNING, "", {.workers = {"w-c"}}).ok());
    v1::Progress progress;
    progress.set_step(7);
    progress.set_train_loss(1.5);
    ASSERT_TRUE(store->set_progress(id, progress).ok());
    ASSERT_TRUE(store->set_message(id, "halfway").ok());
    EXPECT_EQ(store->set_message("nope", "x").code(), absl::StatusCode::kNotFound);
  }
  auto store = open_database();
  JobRecord job = *store->get_job(id);
  EXPECT_EQ(job.workers, (std::vector<std::string>{"w-c"}));
  EXPECT_EQ(job.restarts, 1);
  EXPECT_EQ(job.progress.step(), 7);
  EXPECT_EQ(job.progress.train_loss(), 1.5);
  EXPECT_EQ(job.progress.steps(), 100);
  EXPECT_EQ(job.message, "halfway");
  ASSERT_TRUE(store->transition(id, v1::JOB_STATE_SUCCEEDED, "", {.summary_json = "{}"}).ok());
  EXPECT_EQ(store->get_job(id)->summary_json, "{}");
}

TEST_F(JobDatabaseTest, ReopenedStoreSeesEverything) {
  std::string id;
  {
    auto store = open_database();
    id = create(*store, "durable").id;
    move(*store, id, v1::JOB_STATE_RUNNING);
    ASSERT_TRUE(store->append_log(id, 1, 0, "step 1").ok());
  }
  auto store = open_database();
  absl::StatusOr<JobRecord> job = store->get_job(id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->name, "durable");
  EXPECT_EQ(job->state, v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job->attempt, 1);
  EXPECT_EQ(store->events(id)->size(), 2u);
  EXPECT_EQ(store->attempts(id)->size(), 1u);
  ASSERT_EQ(store->logs(id)->size(), 1u);
  EXPECT_EQ(store->logs(id)->front().text, "step 1");
  move(*store, id, v1::JOB_STATE_FAILED);
}

TEST_F(JobDatabaseTest, NeedsAreStoredWithTheJobAndReadBack) {
  auto store = open_database();
  const JobNeeds needs{
      .workers = 4,
      .backend = config::BackendChoice::kCuda,
      .max_restarts = 2,
      .configurations = {{{3, config::OffloadTarget::kCpu, config::OffloadTarget::kNone,
                           config::ActivationCheckpointing::kBlocks},
                          {124e6, 2.5e9, 1.5e9}},
                         {{2, config::OffloadTarget::kNone, config::OffloadTarget::kNone,
                           config::ActivationCheckpointing::kNone},
                          {124e6, 4.5e9, 0}}},
      .min_loss_scale = 1.0};
  const absl::StatusOr<JobRecord> dynamic = store->create_job("d", "name: d\n", "{}", 10, needs);
  ASSERT_TRUE(dynamic.ok()) << dynamic.status();
  EXPECT_EQ(dynamic->needs, needs);
  JobNeeds static_scale = needs;
  static_scale.min_loss_scale.reset();
  const absl::StatusOr<JobRecord> fixed =
      store->create_job("s", "name: s\n", "{}", 10, static_scale);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(store->get_job(fixed->id)->needs, static_scale);
}

// A database written before the needs and the resolved spec had columns:
// its queued and running jobs get them from their specs, parsed once when
// it is opened; finished ones are left alone, and a spec that no longer
// parses keeps none.
TEST_F(JobDatabaseTest, AnOlderDatabaseGetsTheNeedsAndSpecOfItsActiveJobsOnOpen) {
  std::string queued, finished, broken;
  {
    auto store = open_database();
    const std::string spec =
        "name: old\ndata: {train: builtin:demo}\n"
        "resources: {workers: 3, backend: cpu}\nretries: {max_restarts: 5}\n";
    queued = store->create_job("old", spec, "{}", 10, JobNeeds{})->id;
    finished = store->create_job("old", spec, "{}", 10, JobNeeds{})->id;
    move(*store, finished, v1::JOB_STATE_CANCELLED);
    broken = store->create_job("old", "name: [\n", "{}", 10, JobNeeds{})->id;
  }
  {
    std::unique_ptr<SqliteDb> db = *SqliteDb::open(dir_.path("jobs.db"));
    ASSERT_TRUE(
        db->exec("UPDATE jobs SET needs_workers = NULL, needs_configurations = NULL, spec_json = "
                 "NULL")
            .ok());
  }
  auto store = open_database();
  const std::optional<JobNeeds> needs = store->get_job(queued)->needs;
  ASSERT_TRUE(needs.has_value());
  EXPECT_EQ(needs->workers, 3);
  EXPECT_EQ(needs->backend, config::BackendChoice::kCpu);
  EXPECT_EQ(needs->max_restarts, 5);
  ASSERT_EQ(needs->configurations.size(), 1u);
  EXPECT_GT(needs->configurations[0].memory.parameters, 0);
  const config::JobSpec resolved =
      config::job_spec_from_json(parse_json(store->get_job(queued)->spec_json));
  EXPECT_EQ(resolved.resources.workers, 3);
  EXPECT_EQ(resolved.retries.max_restarts, 5);
  EXPECT_FALSE(store->get_job(finished)->needs.has_value());
  EXPECT_EQ(store->get_job(finished)->spec_json, "");
  EXPECT_FALSE(store->get_job(broken)->needs.has_value());
  EXPECT_EQ(store->get_job(broken)->spec_json, "");
}

// Issue 13: a full disk at start printed the whole schema SQL before the
// real error. A file size limit makes SQLite's writes fail as on a full
// disk (EFBIG, with SIGXFSZ ignored, which SQLite calls an I/O error); the
// error names the statement by its start and says what happened.
TEST_F(JobDatabaseTest, AFullDiskAtOpenIsReportedWithoutTheSchema) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  const sighandler_t previous = signal(SIGXFSZ, SIG_IGN);
  rlimit tiny = saved;
  tiny.rlim_cur = 6000;  // the connection's pragmas fit, the first read of the file does not
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &tiny), 0);
  const absl::StatusOr<std::unique_ptr<JobDatabase>> store =
      JobDatabase::open(dir_.path("full.db"));
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, previous);
  ASSERT_FALSE(store.ok());
  const std::string message(store.status().message());
  EXPECT_EQ(message, "PRAGMA user_version: disk I/O error");
}

// Issue 13: a database file deleted (or replaced) under a running
// coordinator went unnoticed, SQLite writing on into the unlinked file,
// until every job vanished at the next start. Every write now refuses.
TEST_F(JobDatabaseTest, WritesAreRefusedOnceTheFileIsDeletedOrReplaced) {
  for (const bool replace : {false, true}) {
    std::unique_ptr<JobDatabase> store = open_database();
    const JobRecord job = create(*store, "before");
    std::filesystem::remove(dir_.path("jobs.db"));
    if (replace) std::ofstream(dir_.path("jobs.db")) << "";
    const absl::StatusOr<JobRecord> created =
        store->create_job("after", "name: after\n", "{}", 1, JobNeeds{});
    EXPECT_EQ(created.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(created.status().message().find("jobs.db was deleted or replaced while the "
                                              "coordinator ran"),
              std::string::npos)
        << created.status();
    EXPECT_EQ(store->transition(job.id, v1::JOB_STATE_RUNNING, "").status().code(),
              absl::StatusCode::kDataLoss);
    EXPECT_EQ(store->append_log(job.id, 1, 0, "x").code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(store->set_message(job.id, "x").code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(store->get_job(job.id).ok());  // what it holds can still be read
    store.reset();
    std::filesystem::remove(dir_.path("jobs.db"));
  }
}

}  // namespace
}  // namespace mixtrain::server
