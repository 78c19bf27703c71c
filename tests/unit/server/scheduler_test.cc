// Why: gang scheduling is only right when every rank of a job starts
// together, later jobs that fit are not starved by one that cannot start,
// and a failed rank, a lost worker or a cancellation reaches every other
// rank; a command lost on a half-dead stream is written again, and a worker
// back from a partition gets no new rank while it stops its old one. These
// tests drive a real coordinator with fake workers over gRPC.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "cluster_fixture.h"
#include "engine/common/json.h"
#include "engine/config/job_spec_json.h"
#include "jobspec/job_spec_yaml.h"
#include "server/sqlite_db.h"

namespace mixtrain::server {
namespace {

using testing_support::ClusterTest;
using testing_support::FakeWorker;
using testing_support::rank_summary;
using testing_support::rank_summary_json;
using testing_support::spec;

using SchedulerTest = ClusterTest;

TEST_F(SchedulerTest, RegisteredWorkerHeartbeatsAndReceivesTheTaskOfASubmittedJob) {
  auto worker = this->worker();
  ASSERT_FALSE(worker->id().empty());
  EXPECT_EQ(worker->heartbeat_interval_ms(), 200);
  const std::string id = submit(spec(1));
  const v1::Task task = worker->next_start();
  EXPECT_EQ(task.job_id(), id);
  EXPECT_EQ(task.attempt(), 1);
  EXPECT_EQ(task.rank(), 0);
  EXPECT_EQ(task.world_size(), 1);
  // The spec as validated at submit, not its YAML.
  EXPECT_EQ(config::job_spec_from_json(parse_json(task.spec_json())),
            *jobspec::parse_job_spec(spec(1), "t.yaml").spec);
  EXPECT_EQ(task.rendezvous_scope(), id + "/1");
  EXPECT_EQ(task.checkpoint_dir(), dir_.path("ckpt") + "/" + id);
  EXPECT_FALSE(task.resume());
  EXPECT_EQ(task.data_root(), std::filesystem::canonical(dir_.path()).string());
  const v1::Job running = await_state(id, v1::JOB_STATE_RUNNING);
  ASSERT_EQ(running.workers_size(), 1);
  EXPECT_EQ(running.workers(0), worker->id());

  const v1::ListWorkersResponse workers = list_workers();
  ASSERT_EQ(workers.workers_size(), 1);
  EXPECT_EQ(workers.workers(0).state(), v1::WORKER_STATE_BUSY);
  EXPECT_EQ(workers.workers(0).task().job_id(), id);
}

// The floor of dynamic loss scaling travels with the task (the worker
// exports it for the alerts without parsing the spec); bf16 jobs, which
// do not scale their loss, carry none.
TEST_F(SchedulerTest, ATaskCarriesItsJobsMinLossScaleOnlyUnderDynamicScaling) {
  auto worker = this->worker();
  submit(spec(1) + "precision: {compute: fp16, min_scale: 4}\n");
  const v1::Task fp16 = worker->next_start();
  ASSERT_TRUE(fp16.has_min_loss_scale());
  EXPECT_EQ(fp16.min_loss_scale(), 4.0);
  ASSERT_TRUE(worker->report(fp16, v1::TASK_OUTCOME_SUCCEEDED, "", "{}").ok());
  submit(spec(1));
  EXPECT_FALSE(worker->next_start().has_min_loss_scale());
}

TEST_F(SchedulerTest, GangJobWaitsForEnoughIdleWorkersThenStartsEveryRank) {
  auto first = worker();
  const std::string id = submit(spec(2, 0, "cpu"));
  EXPECT_TRUE(eventually([&] {
    return job(id).message() == "asks for 2 cpu workers, only 1 registered";
  })) << job(id).message();
  auto cuda = worker({.backend = v1::BACKEND_CUDA});
  EXPECT_FALSE(first->next(std::chrono::milliseconds(300)).has_value());
  EXPECT_EQ(job(id).state(), v1::JOB_STATE_QUEUED);

  auto second = worker();
  const v1::Task a = first->next_start();
  const v1::Task b = second->next_start();
  EXPECT_EQ(a.rank() + b.rank(), 1);
  EXPECT_EQ(a.world_size(), 2);
  EXPECT_EQ(b.world_size(), 2);
  EXPECT_FALSE(cuda->next(std::chrono::milliseconds(100)).has_value());
  await_state(id, v1::JOB_STATE_RUNNING);
}

// 3,000 queued jobs with 64 KiB specs once cost 0.4 s of CPU per pass
// (issue 29): a pass must not read a queued job's spec or needs again,
// they never change. Here they vanish from the store while it waits, and
// it still starts with them.
TEST_F(SchedulerTest, AQueuedJobsNeedsAreReadOnceAndNotOnEveryPass) {
  auto first = worker();
  const std::string id = submit(spec(2, 0, "cpu"));
  ASSERT_TRUE(eventually([&] {
    return job(id).message() == "asks for 2 cpu workers, only 1 registered";
  })) << job(id).message();
  auto sql = SqliteDb::open(dir_.path("jobs.db"));
  ASSERT_TRUE(sql.ok()) << sql.status();
  ASSERT_TRUE((*sql)
                  ->exec(("UPDATE jobs SET needs_workers = NULL, needs_configurations = NULL, "
                          "spec_yaml = '' WHERE id = '" + id + "'")
                             .c_str())
                  .ok());
  auto second = worker();
  const v1::Task a = first->next_start();
  const v1::Task b = second->next_start();
  EXPECT_EQ(a.world_size(), 2);
  EXPECT_EQ(a.job_id(), id);
  EXPECT_EQ(b.job_id(), id);
  EXPECT_NE(job(id).message(), "the stored spec no longer parses");
}

TEST_F(SchedulerTest, WaitingMessageCountsIdleWorkers) {
  auto busy = worker();
  const std::string one = submit(spec(1));
  busy->next_start();
  auto idle = worker();
  const std::string two = submit(spec(2));
  EXPECT_TRUE(eventually([&] {
    return job(two).message() == "waiting for 2 idle workers, 1 idle now";
  })) << job(two).message();
  EXPECT_EQ(job(one).state(), v1::JOB_STATE_RUNNING);
}

TEST_F(SchedulerTest, JobThatCannotStartDoesNotBlockASmallerOneBehindIt) {
  auto worker = this->worker();
  const std::string big = submit(spec(3));
  const std::string small = submit(spec(1));
  const v1::Task task = worker->next_start();
  EXPECT_EQ(task.job_id(), small);
  EXPECT_EQ(job(big).state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(job(big).message(), "asks for 3 workers, only 1 registered");
}

TEST_F(SchedulerTest, JobSucceedsWhenEveryRankDoesWithTheRankSummariesMerged) {
  auto first = worker();
  auto second = worker();
  const std::string id = submit(spec(2));
  v1::Task tasks[2];
  for (FakeWorker* w : {first.get(), second.get()}) {
    const v1::Task task = w->next_start();
    tasks[task.rank()] = task;
  }
  FakeWorker* by_rank[2] = {job(id).workers(0) == first->id() ? first.get() : second.get(),
                            job(id).workers(0) == first->id() ? second.get() : first.get()};
  ASSERT_TRUE(by_rank[0]->report(tasks[0], v1::TASK_OUTCOME_RUNNING, "", "", 4).ok());
  EXPECT_TRUE(eventually([&] { return job(id).progress().step() == 4; }));
  ASSERT_TRUE(
      by_rank[1]->report(tasks[1], v1::TASK_OUTCOME_SUCCEEDED, "", rank_summary_json(1, 9)).ok());
  EXPECT_EQ(job(id).state(), v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(
      by_rank[0]->report(tasks[0], v1::TASK_OUTCOME_SUCCEEDED, "", rank_summary_json(0), 10).ok());
  const v1::Job done = await_state(id, v1::JOB_STATE_SUCCEEDED);
  // Rank 0's summary with both ranks' entries, in rank order.
  TrainSummary expected = rank_summary(0);
  expected.ranks.push_back(rank_summary(1).ranks[0]);
  EXPECT_EQ(done.summary_json(), dump_json(expected.to_json()));
  EXPECT_EQ(done.progress().step(), 10);
  EXPECT_EQ(done.restarts(), 0);
  ASSERT_GE(done.events_size(), 3);
  EXPECT_EQ(done.events(done.events_size() - 1).state(), v1::JOB_STATE_SUCCEEDED);
}

TEST_F(SchedulerTest, FailedRankCancelsTheOtherRankRequeuesAndFailsAfterMaxRestarts) {
  auto first = worker();
  auto second = worker();
  const std::string id = submit(spec(2, /*max_restarts=*/1));
  for (int attempt = 1; attempt <= 2; ++attempt) {
    const v1::Task a = first->next_start();
    const v1::Task b = second->next_start();
    EXPECT_EQ(a.attempt(), attempt);
    EXPECT_EQ(a.resume(), attempt > 1);
    ASSERT_TRUE(second->report(b, v1::TASK_OUTCOME_FAILED, "out of memory").ok());
    const std::optional<v1::TaskCommand> cancel = first->next();
    ASSERT_TRUE(cancel.has_value() && cancel->has_cancel())
        << (cancel ? cancel->DebugString() : "");
    EXPECT_EQ(cancel->cancel().job_id(), id);
    EXPECT_EQ(cancel->cancel().attempt(), attempt);
  }
  const v1::Job failed = await_state(id, v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.restarts(), 1);
  EXPECT_EQ(failed.attempt(), 2);
  EXPECT_NE(failed.message().find("worker " + second->id() + " failed: out of memory"),
            std::string::npos)
      << failed.message();
  EXPECT_NE(failed.message().find("no restarts left"), std::string::npos);
  bool requeued = false;
  for (const v1::JobEvent& event : failed.events()) {
    if (event.state() == v1::JOB_STATE_QUEUED &&
        event.message().find("restart 1 of 1") != std::string::npos) {
      requeued = true;
    }
  }
  EXPECT_TRUE(requeued);
}

TEST_F(SchedulerTest, SilentWorkerBecomesLostAndItsJobIsRequeued) {
  auto first = worker();
  auto second = worker();
  const std::string id = submit(spec(2, /*max_restarts=*/2));
  first->next_start();
  // Its rank started (a rank lost before that spends no restart).
  ASSERT_TRUE(second->report(second->next_start(), v1::TASK_OUTCOME_RUNNING).ok());
  second->stop_heartbeats();
  const std::optional<v1::TaskCommand> cancel = first->next(std::chrono::seconds(4));
  ASSERT_TRUE(cancel.has_value() && cancel->has_cancel());
  EXPECT_TRUE(eventually([&] {
    v1::Job current = job(id);
    return current.restarts() == 1 && current.state() == v1::JOB_STATE_QUEUED;
  })) << job(id).DebugString();
  const std::string requeued = last_event_message(id, v1::JOB_STATE_QUEUED);
  EXPECT_NE(requeued.find("rank 1 on worker " + second->id() + " was lost"), std::string::npos)
      << requeued;
  // While it waits (after its restart backoff), its message still says
  // why it was restarted.
  EXPECT_TRUE(eventually([&] {
    return job(id).message().find("only 1 registered (after attempt 1 failed: rank 1 on worker " +
                                  second->id() + " was lost") != std::string::npos;
  })) << job(id).message();
  // The first worker is free again once its heartbeat no longer lists the
  // cancelled task (not before: it may still be stopping it).
  v1::ListWorkersResponse workers;
  EXPECT_TRUE(eventually([&] {
    workers.Clear();
    return jobs_
               ->ListWorkers(testing_support::call_context(testing_support::kClientToken).get(), {},
                             &workers)
               .ok() &&
           workers.workers(0).state() == v1::WORKER_STATE_IDLE;
  })) << workers.DebugString();
  EXPECT_EQ(workers.workers(1).state(), v1::WORKER_STATE_LOST);
}

TEST_F(SchedulerTest, CancellingARunningJobCancelsEveryRank) {
  auto first = worker();
  auto second = worker();
  const std::string id = submit(spec(2));
  const v1::Task a = first->next_start();
  second->next_start();
  v1::CancelJobRequest request;
  request.set_id(id);
  v1::Job cancelled;
  ASSERT_TRUE(jobs_
                  ->CancelJob(testing_support::call_context(testing_support::kClientToken).get(),
                              request, &cancelled)
                  .ok());
  EXPECT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED);
  for (FakeWorker* w : {first.get(), second.get()}) {
    const std::optional<v1::TaskCommand> cancel = w->next();
    ASSERT_TRUE(cancel.has_value() && cancel->has_cancel());
    EXPECT_EQ(cancel->cancel().job_id(), id);
  }
  // The workers are free again once their tasks ended: a new job starts.
  ASSERT_TRUE(first->report(a, v1::TASK_OUTCOME_CANCELLED).ok());
  const std::string next = submit(spec(2));
  EXPECT_EQ(first->next_start().job_id(), next);
  EXPECT_EQ(second->next_start().job_id(), next);
}

TEST_F(SchedulerTest, RendezvousScopeIsDroppedWhenTheAttemptEnds) {
  auto w = worker();
  const std::string id = submit(spec(1));
  const v1::Task task = w->next_start();
  v1::StoreSetRequest set;
  set.set_worker_id(w->id());
  set.set_scope(task.rendezvous_scope());
  set.set_key("addr");
  set.set_value("x");
  v1::StoreSetResponse set_response;
  ASSERT_TRUE(w->stub().StoreSet(w->context().get(), set, &set_response).ok());
  v1::StoreGetRequest get;
  get.set_worker_id(w->id());
  get.set_scope(task.rendezvous_scope());
  get.set_key("addr");
  v1::StoreGetResponse got;
  ASSERT_TRUE(w->stub().StoreGet(w->context().get(), get, &got).ok());
  ASSERT_TRUE(w->report(task, v1::TASK_OUTCOME_SUCCEEDED, "", "{}").ok());
  await_state(id, v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(w->stub().StoreGet(w->context().get(), get, &got).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(w->stub().StoreSet(w->context().get(), set, &set_response).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(SchedulerTest, StaleReportOfAnEarlierAttemptIsIgnored) {
  auto w = worker();
  const std::string id = submit(spec(1, 1));
  const v1::Task first = w->next_start();
  ASSERT_TRUE(w->report(first, v1::TASK_OUTCOME_FAILED, "boom").ok());
  const v1::Task second = w->next_start();
  EXPECT_EQ(second.attempt(), 2);
  ASSERT_TRUE(w->report(first, v1::TASK_OUTCOME_FAILED, "late").ok());
  EXPECT_EQ(job(id).state(), v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(w->report(second, v1::TASK_OUTCOME_SUCCEEDED, "", "{}").ok());
  await_state(id, v1::JOB_STATE_SUCCEEDED);
}

TEST_F(SchedulerTest, CallsOfAnUnknownWorkerAreNotFoundButHeartbeatAsksToRegister) {
  auto stub = v1::WorkerService::NewStub(channel_);
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id("w-nobody");
  v1::HeartbeatResponse beat;
  ASSERT_TRUE(stub->Heartbeat(testing_support::call_context(testing_support::kJoinToken).get(),
                              heartbeat, &beat)
                  .ok());
  EXPECT_TRUE(beat.reregister());
  v1::ReportProgressRequest report;
  report.set_worker_id("w-nobody");
  v1::ReportProgressResponse reported;
  EXPECT_EQ(stub->ReportProgress(testing_support::call_context(testing_support::kJoinToken).get(),
                                 report, &reported)
                .error_code(),
            grpc::StatusCode::NOT_FOUND);
  v1::TasksRequest tasks;
  tasks.set_worker_id("w-nobody");
  auto context = testing_support::call_context(testing_support::kJoinToken);
  auto reader = stub->Tasks(context.get(), tasks);
  v1::TaskCommand command;
  EXPECT_FALSE(reader->Read(&command));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(SchedulerTest, AStartLostOnAHalfDeadStreamIsWrittenAgainOnTheNextStream) {
  auto w = worker({.lose_starts = 1});
  const std::string id = submit(spec(1));
  // Written to the stream, never arrived (a partition): nothing to read, and
  // the worker's heartbeats do not list the task.
  EXPECT_FALSE(w->next(std::chrono::milliseconds(600)).has_value());
  w->reopen_stream();  // the agent reconnects
  const v1::Task task = w->next_start();
  EXPECT_EQ(task.job_id(), id);
  EXPECT_EQ(task.attempt(), 1);
  // Once its heartbeats list the task, it is not written again.
  std::this_thread::sleep_for(std::chrono::milliseconds(3 * w->heartbeat_interval_ms()));
  w->reopen_stream();
  EXPECT_FALSE(w->next(std::chrono::milliseconds(600)).has_value());
  EXPECT_EQ(job(id).state(), v1::JOB_STATE_RUNNING);
}

TEST_F(SchedulerTest, AWorkerBackFromAPartitionStopsItsOldRankBeforeItGetsANewOne) {
  auto w = worker();
  const std::string id = submit(spec(1, /*max_restarts=*/1));
  const v1::Task first = w->next_start();
  ASSERT_TRUE(w->report(first, v1::TASK_OUTCOME_RUNNING).ok());  // it started
  w->stop_heartbeats();  // partitioned: lost after the timeout, its attempt requeued
  EXPECT_TRUE(eventually([&] { return job(id).restarts() == 1; })) << job(id).DebugString();
  // The partition heals: its agent registers again, still running the old
  // rank, which takes 1.5 s to stop once cancelled.
  auto back = worker({.previous_worker_id = w->id(),
                      .previous_worker_secret = w->secret(),
                      .running = {v1::running_of(first)},
                      .cancel_takes = std::chrono::milliseconds(1500)});
  const std::optional<v1::TaskCommand> cancel = back->next();
  ASSERT_TRUE(cancel.has_value() && cancel->has_cancel());
  EXPECT_EQ(cancel->cancel().attempt(), 1);
  // While it stops, it is busy: the restart waits instead of being refused.
  EXPECT_FALSE(back->next(std::chrono::milliseconds(1000)).has_value());
  const v1::ListWorkersResponse workers = list_workers();
  ASSERT_EQ(workers.workers_size(), 1);
  EXPECT_EQ(workers.workers(0).state(), v1::WORKER_STATE_BUSY);
  const v1::Task second = back->next_start();
  EXPECT_EQ(second.attempt(), 2);
  ASSERT_TRUE(back->report(second, v1::TASK_OUTCOME_SUCCEEDED, "", "{}").ok());
  await_state(id, v1::JOB_STATE_SUCCEEDED);
}

// Issue 17: a job no registered worker can hold is refused at submit with
// the planner's figures and, where one exists, the cheapest choice that
// fits the largest worker; nothing is stored. One that fits the workers
// registered but needs more of them than there are waits, saying so.
TEST_F(SchedulerTest, AJobNoWorkerCanHoldIsRefusedWithWhatWouldFit) {
  // The message of a submit that must be refused as INVALID_ARGUMENT.
  auto refusal = [&](const std::string& yaml) {
    const grpc::Status status = try_submit(yaml);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    return status.error_message();
  };
  auto small = worker({.memory_bytes = int64_t{4} << 30});
  const std::string huge =
      "name: gpt3\ndata: {train: builtin:demo}\ntrain: {steps: 10, warmup_steps: 2}\n"
      "model: {layers: 96, heads: 96, dim: 12288, seq_len: 2048, vocab: 50257}\n"
      "precision: {compute: bf16}\nzero: {stage: 3}\nresources: {workers: 1}\n";
  EXPECT_THAT(refusal(huge),
              testing::MatchesRegex(
                  "job.yaml: no registered worker has room for a rank \\(each needs .* GiB plus "
                  ".* GiB in host memory for "
                  "1.75e\\+11 parameters at zero.stage 3\\); the largest, " +
                  small->id() +
                  ", has 4 GiB; no ZeRO stage, offload or activation checkpointing fits it: "
                  "more workers or a smaller train.micro_batch would"));
  // Fits the worker registered, but asks for three: it waits, saying why,
  // and a job that fits still runs there.
  const std::string three = submit(
      "name: three\ndata: {train: builtin:demo}\ntrain: {steps: 10, warmup_steps: 2}\n"
      "model: {layers: 2, heads: 2, dim: 64, seq_len: 32}\nresources: {workers: 3}\n");
  EXPECT_TRUE(eventually([&] { return job(three).message().starts_with("asks for 3"); }));
  EXPECT_EQ(job(three).state(), v1::JOB_STATE_QUEUED);
  const std::string fits = submit(spec(1));
  small->next_start();
  await_state(fits, v1::JOB_STATE_RUNNING);

  // GPT-2 small's shape at seq 1024, micro_batch 16: 12.8 GiB a rank, most
  // of it activations, do not fit 8 GiB; recomputing attention, LayerNorm
  // and GELU does.
  auto medium = worker({.memory_bytes = int64_t{8} << 30});
  const std::string activations =
      "name: gpt2\ndata: {train: builtin:demo}\ntrain: {steps: 10, warmup_steps: 2, "
      "micro_batch: 16}\nmodel: {layers: 12, heads: 12, dim: 768, seq_len: 1024}\n"
      "resources: {workers: 1}\n";
  EXPECT_THAT(refusal(activations),
              testing::EndsWith("the largest, " + medium->id() +
                                ", has 8 GiB; fits with zero.stage 0 + activation_checkpointing "
                                "selective"));
  // Left to the coordinator (auto), the same job is taken and starts with
  // that choice: its task's spec has it made, the job records it.
  const std::string automatic = submit(
      "name: gpt2\ndata: {train: builtin:demo}\ntrain: {steps: 10, warmup_steps: 2, "
      "micro_batch: 16, activation_checkpointing: auto}\nmodel: {layers: 12, heads: 12, dim: 768, "
      "seq_len: 1024}\nzero: {stage: auto}\nresources: {workers: 1}\n");
  const v1::Task task = medium->next_start();
  EXPECT_EQ(task.job_id(), automatic);
  const config::JobSpec run = config::job_spec_from_json(parse_json(task.spec_json()));
  EXPECT_EQ(run.auto_keys, config::AutoKeys{});
  EXPECT_EQ(run.zero.stage, 0);
  EXPECT_EQ(run.train.activation_checkpointing, config::ActivationCheckpointing::kSelective);
  await_state(automatic, v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job(automatic).configuration(),
            "zero.stage 0, train.activation_checkpointing selective");
  v1::ListJobsResponse listed;
  ASSERT_TRUE(jobs_
                  ->ListJobs(testing_support::call_context(testing_support::kClientToken).get(), {},
                             &listed)
                  .ok());
  EXPECT_EQ(listed.jobs_size(), 3);  // three, fits, automatic: nothing of the refused ones
}

// Issue 17: queued jobs start by scheduling.priority, higher first, and in
// submit order within one; a submit's overrides (--priority, --set) apply
// before validation, and a priority out of range is refused naming it.
TEST_F(SchedulerTest, HigherPrioritiesStartFirstAndFifoWithinOne) {
  auto busy = worker();
  const std::string running =
      submit(spec(1, 0, "auto", "running") + "scheduling: {preemptible: false}\n");
  const v1::Task held = busy->next_start();
  const std::string low = submit(spec(1, 0, "auto", "low"));
  const std::string high_late = submit(spec(1, 0, "auto", "high") + "scheduling: {priority: 5}\n");
  v1::SubmitJobRequest request;
  request.set_spec_yaml(spec(1, 0, "auto", "override"));
  request.add_overrides("scheduling.priority=5");
  v1::SubmitJobResponse response;
  ASSERT_TRUE(jobs_
                  ->SubmitJob(testing_support::call_context(testing_support::kClientToken).get(),
                              request, &response)
                  .ok());
  const std::string high_later = response.id();
  EXPECT_EQ(job(high_later).priority(), 5);
  request.set_overrides(0, "scheduling.priority=1001");
  const grpc::Status refused = jobs_->SubmitJob(
      testing_support::call_context(testing_support::kClientToken).get(), request, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(),
              testing::HasSubstr("scheduling.priority: must be at most 1000, got 1001"));

  ASSERT_TRUE(busy->report(held, v1::TASK_OUTCOME_SUCCEEDED, "", rank_summary_json(0)).ok());
  std::vector<std::string> order;
  for (int i = 0; i < 3; ++i) {
    const v1::Task next = busy->next_start();
    order.push_back(next.job_id());
    ASSERT_TRUE(busy->report(next, v1::TASK_OUTCOME_SUCCEEDED, "", rank_summary_json(0)).ok());
  }
  EXPECT_EQ(order, (std::vector<std::string>{high_late, high_later, low}));
  EXPECT_EQ(job(running).state(), v1::JOB_STATE_SUCCEEDED);
}

// Issue 17: a high-priority job that lacks workers preempts a lower one:
// that one's ranks are asked to checkpoint and stop (PREEMPTED), it
// requeues without spending a restart once they did, the high one starts
// on the freed workers, and the low one resumes after it.
TEST_F(SchedulerTest, AHigherPriorityJobPreemptsALowerOneWhichResumesAfterIt) {
  auto a = worker();
  auto b = worker();
  const std::string low = submit(spec(2, 0, "auto", "low"));
  const v1::Task low_a = a->next_start();
  const v1::Task low_b = b->next_start();
  await_state(low, v1::JOB_STATE_RUNNING);
  const std::string high = submit(spec(2, 0, "auto", "high") + "scheduling: {priority: 5}\n");
  await_state(low, v1::JOB_STATE_PREEMPTED);
  const std::string pinned =
      submit(spec(2, 0, "auto", "pinned") + "scheduling: {priority: 3, preemptible: false}\n");
  for (FakeWorker* w : {a.get(), b.get()}) {
    const std::optional<v1::TaskCommand> command = w->next();
    ASSERT_TRUE(command && command->has_preempt()) << (command ? command->DebugString() : "none");
    EXPECT_EQ(command->preempt().job_id(), low);
    EXPECT_EQ(command->preempt().attempt(), 1);
  }
  EXPECT_THAT(job(high).message(), testing::HasSubstr("waiting for 2 idle"));
  ASSERT_TRUE(a->report(low_a, v1::TASK_OUTCOME_PREEMPTED, "", "", 4).ok());
  ASSERT_TRUE(b->report(low_b, v1::TASK_OUTCOME_PREEMPTED, "", "", 4).ok());
  const v1::Task high_a = a->next_start();
  const v1::Task high_b = b->next_start();
  EXPECT_EQ(high_a.job_id(), high);
  EXPECT_EQ(high_b.job_id(), high);
  const v1::Job requeued = job(low);
  EXPECT_EQ(requeued.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(requeued.restarts(), 0);
  std::vector<v1::JobState> states;
  for (const v1::JobEvent& event : requeued.events()) states.push_back(event.state());
  EXPECT_EQ(states, (std::vector<v1::JobState>{v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING,
                                               v1::JOB_STATE_PREEMPTED, v1::JOB_STATE_QUEUED}));
  EXPECT_THAT(requeued.events(3).message(), testing::HasSubstr("preempted for job " + high +
                                                               " (priority 5); its ranks "
                                                               "checkpointed step 4 and stopped"));
  // The non-preemptible job of priority 3 goes next, then the low one,
  // which resumes.
  const auto finish = [&](const v1::Task& on_a, const v1::Task& on_b) {
    ASSERT_TRUE(
        a->report(on_a, v1::TASK_OUTCOME_SUCCEEDED, "", rank_summary_json(on_a.rank())).ok());
    ASSERT_TRUE(
        b->report(on_b, v1::TASK_OUTCOME_SUCCEEDED, "", rank_summary_json(on_b.rank())).ok());
  };
  finish(high_a, high_b);
  const v1::Task pinned_a = a->next_start();
  const v1::Task pinned_b = b->next_start();
  EXPECT_EQ(pinned_a.job_id(), pinned);
  finish(pinned_a, pinned_b);
  const v1::Task resumed = a->next_start();
  EXPECT_EQ(resumed.job_id(), low);
  EXPECT_EQ(resumed.attempt(), 2);
  EXPECT_TRUE(resumed.resume());
}

// A preempted job whose ranks do not stop within the grace period is
// stopped anyway and requeued (to resume from its last checkpoint).
TEST_F(SchedulerTest, APreemptedJobThatDoesNotStopInTimeIsStoppedAnyway) {
  CoordinatorOptions short_grace = options();
  short_grace.preempt_grace = std::chrono::milliseconds(1000);
  start(short_grace);
  auto a = worker();
  const std::string low = submit(spec(1, 0, "auto", "low"));
  const v1::Task low_a = a->next_start();
  const std::string high = submit(spec(1, 0, "auto", "high") + "scheduling: {priority: 1}\n");
  const std::optional<v1::TaskCommand> preempt = a->next();
  ASSERT_TRUE(preempt && preempt->has_preempt());
  const std::optional<v1::TaskCommand> cancel = a->next(std::chrono::seconds(5));
  ASSERT_TRUE(cancel && cancel->has_cancel()) << (cancel ? cancel->DebugString() : "none");
  EXPECT_EQ(cancel->cancel().job_id(), low);
  EXPECT_TRUE(eventually([&] { return job(low).state() == v1::JOB_STATE_QUEUED; }));
  EXPECT_THAT(job(low).events().rbegin()->message(),
              testing::HasSubstr("did not checkpoint within 1 s and were stopped"));
  EXPECT_EQ(job(low).restarts(), 0);
  ASSERT_TRUE(a->report(low_a, v1::TASK_OUTCOME_CANCELLED, "cancelled").ok());
  EXPECT_EQ(a->next_start().job_id(), high);
}

// Issue 29: a waiting job of a higher priority that could not start even
// with preemption (it asks for more workers than are registered) does not
// stop a job of a middle priority from preempting a low one.
TEST_F(SchedulerTest, AJobThatCannotStartHoldsBackNoPreemptionForOthers) {
  auto a = worker();
  auto b = worker();
  const std::string low = submit(spec(2, 0, "auto", "low"));
  const v1::Task low_a = a->next_start();
  const v1::Task low_b = b->next_start();
  const std::string huge = submit(spec(3, 0, "auto", "huge") + "scheduling: {priority: 10}\n");
  EXPECT_TRUE(eventually([&] {
    return job(huge).message() == "asks for 3 workers, only 2 registered";
  })) << job(huge).message();
  const std::string middle = submit(spec(2, 0, "auto", "middle") + "scheduling: {priority: 5}\n");
  await_state(low, v1::JOB_STATE_PREEMPTED);
  EXPECT_THAT(job(low).message(), testing::HasSubstr("preempted for job " + middle));
  for (FakeWorker* w : {a.get(), b.get()}) {
    const std::optional<v1::TaskCommand> command = w->next();
    ASSERT_TRUE(command && command->has_preempt()) << (command ? command->DebugString() : "none");
  }
  ASSERT_TRUE(a->report(low_a, v1::TASK_OUTCOME_PREEMPTED, "", "", 3).ok());
  ASSERT_TRUE(b->report(low_b, v1::TASK_OUTCOME_PREEMPTED, "", "", 3).ok());
  EXPECT_EQ(a->next_start().job_id(), middle);
  EXPECT_EQ(b->next_start().job_id(), middle);
  EXPECT_EQ(job(huge).state(), v1::JOB_STATE_QUEUED);
}

// Issue 29: a rank that fails while its job is PREEMPTED (before its
// ranks checkpointed) spends a restart like any failed attempt, so a job
// whose ranks crash at every preemption ends once its restarts are spent.
TEST_F(SchedulerTest, ARankFailingWhilePreemptedSpendsARestart) {
  auto a = worker();
  const std::string low = submit(spec(1, /*max_restarts=*/1, "auto", "low"));
  const auto preempt_and_crash = [&](int attempt) {
    const v1::Task task = a->next_start();
    EXPECT_EQ(task.job_id(), low);
    EXPECT_EQ(task.attempt(), attempt);
    const std::string high = submit(spec(1, 0, "auto", "high") + "scheduling: {priority: 1}\n");
    const std::optional<v1::TaskCommand> preempt = a->next();
    ASSERT_TRUE(preempt && preempt->has_preempt());
    ASSERT_TRUE(a->report(task, v1::TASK_OUTCOME_FAILED, "killed by signal 6 (SIGABRT)").ok());
    const v1::Task on_a = a->next_start();
    EXPECT_EQ(on_a.job_id(), high);
    ASSERT_TRUE(a->report(on_a, v1::TASK_OUTCOME_SUCCEEDED, "", rank_summary_json(0)).ok());
  };
  preempt_and_crash(1);
  EXPECT_EQ(job(low).restarts(), 1);
  EXPECT_THAT(job(low).events(3).message(), testing::HasSubstr("restart 1 of 1"));
  preempt_and_crash(2);
  const v1::Job failed = await_state(low, v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.restarts(), 1);
  EXPECT_THAT(failed.message(), testing::HasSubstr("no restarts left"));
}

// Issue 16: compute fp8 needs fp8 tensor cores (sm_89+). With only an
// Ampere GPU registered the submit is refused naming it; once a Hopper
// registers, the job is taken and goes to the Hopper, not the Ampere.
TEST_F(SchedulerTest, Fp8IsRefusedAtSubmitForOlderGpusAndPlacedOnNewOnes) {
  auto gpu = [](const char* name, int major, int minor) {
    v1::CudaDevice device;
    device.set_name(name);
    device.set_compute_capability_major(major);
    device.set_compute_capability_minor(minor);
    return device;
  };
  const std::string fp8 =
      "name: fp8\ndata: {train: builtin:demo}\ntrain: {steps: 10, warmup_steps: 2}\n"
      "model: {layers: 1, heads: 2, dim: 32, seq_len: 16, vocab: 64}\n"
      "precision: {compute: fp8}\nresources: {workers: 1, backend: cuda}\n";
  auto ampere = worker({.backend = v1::BACKEND_CUDA, .cuda_devices = {gpu("NVIDIA A100", 8, 0)}});
  const grpc::Status refused = try_submit(fp8);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(refused.error_message(),
            "job.yaml: compute fp8 needs a GPU of sm_89 or newer (fp8 tensor cores: Ada, Hopper, "
            "Blackwell); every registered cuda worker has an older one: " +
                ampere->id() + " cuda:0 (NVIDIA A100, sm_80)");
  v1::ListJobsResponse listed;
  ASSERT_TRUE(jobs_
                  ->ListJobs(testing_support::call_context(testing_support::kClientToken).get(), {},
                             &listed)
                  .ok());
  EXPECT_EQ(listed.jobs_size(), 0);  // nothing stored

  auto hopper = worker({.backend = v1::BACKEND_CUDA, .cuda_devices = {gpu("NVIDIA H200", 9, 0)}});
  const std::string id = submit(fp8);
  hopper->next_start();
  await_state(id, v1::JOB_STATE_RUNNING);
  EXPECT_FALSE(ampere->next(std::chrono::milliseconds(300)).has_value());
}

// Issue 13: a job failing at once used to spend every restart within a
// second; restarts now wait 1 s, 2 s, ... and say so.
TEST_F(SchedulerTest, RestartsBackOffExponentiallyAndSaySo) {
  auto rank = worker();
  const std::string id = submit(spec(1, /*max_restarts=*/2));
  std::vector<std::chrono::steady_clock::time_point> starts;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    const v1::Task task = rank->next_start();
    starts.push_back(std::chrono::steady_clock::now());
    ASSERT_TRUE(rank->report(task, v1::TASK_OUTCOME_FAILED, "bad data").ok());
    if (attempt == 1) {
      EXPECT_TRUE(eventually(
          [&] { return job(id).message().starts_with("restarting in 1 s (backoff) (after"); }))
          << job(id).message();
    }
  }
  EXPECT_GE(starts[1] - starts[0], std::chrono::milliseconds(900));
  EXPECT_GE(starts[2] - starts[1], std::chrono::milliseconds(1900));
  await_state(id, v1::JOB_STATE_FAILED);
}

// Issue 13: a rank that hangs (alive, heartbeating, stepping no more) was
// never noticed; its attempt now fails with "no progress".
TEST_F(SchedulerTest, AHungRankFailsItsAttemptWithNoProgress) {
  CoordinatorOptions hurried = options();
  hurried.stall_timeout = std::chrono::milliseconds(1500);
  start(hurried);
  auto rank = worker();
  const std::string id = submit(spec(1, /*max_restarts=*/1));
  const v1::Task task = rank->next_start();
  for (int step = 1; step <= 4; ++step) {  // 50 ms a step: 20 steps take 1 s
    ASSERT_TRUE(rank->report(task, v1::TASK_OUTCOME_RUNNING, "", "", step).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Then it hangs: heartbeats go on, steps do not.
  const std::optional<v1::TaskCommand> cancel = rank->next(std::chrono::seconds(10));
  ASSERT_TRUE(cancel.has_value() && cancel->has_cancel());
  EXPECT_NE(cancel->cancel().reason().find("made no progress: rank 0 reported no step after "
                                           "step 4 for "),
            std::string::npos)
      << cancel->cancel().reason();
  EXPECT_TRUE(eventually([&] { return job(id).restarts() == 1; }));
}

// Issue 29: a rank frozen before its first step has no step time for the
// stall watchdog to measure; the first step is due within
// first_step_timeout of the attempt's start.
TEST_F(SchedulerTest, ARankWithoutAFirstStepFailsItsAttemptWithNoProgress) {
  CoordinatorOptions hurried = options();
  hurried.first_step_timeout = std::chrono::milliseconds(1000);
  start(hurried);
  auto rank = worker();
  const std::string id = submit(spec(1, /*max_restarts=*/1));
  rank->next_start();
  const std::optional<v1::TaskCommand> cancel = rank->next(std::chrono::seconds(10));
  ASSERT_TRUE(cancel.has_value() && cancel->has_cancel());
  EXPECT_THAT(cancel->cancel().reason(),
              testing::HasSubstr("made no progress: rank 0 reported no step within 1 s of the "
                                 "attempt's start"));
  EXPECT_TRUE(eventually([&] { return job(id).restarts() == 1; }));
}

// Issue 29: an evaluation longer than the stall timeout is progress while
// its batches advance, and a rank that stops in the middle of one is hung.
TEST_F(SchedulerTest, ALongEvaluationIsProgressUntilItsBatchesStop) {
  CoordinatorOptions hurried = options();
  hurried.stall_timeout = std::chrono::milliseconds(1500);
  start(hurried);
  auto rank = worker();
  const std::string id = submit(spec(1, /*max_restarts=*/1));
  const v1::Task task = rank->next_start();
  for (int step = 1; step <= 4; ++step) {  // 50 ms a step
    ASSERT_TRUE(rank->report(task, v1::TASK_OUTCOME_RUNNING, "", "", step).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // 4 s of evaluation after step 4, a batch every 250 ms.
  for (int batch = 1; batch <= 16; ++batch) {
    ASSERT_TRUE(rank->report(task, v1::TASK_OUTCOME_RUNNING, "", "", 4, batch).ok());
    const std::optional<v1::TaskCommand> command = rank->next(std::chrono::milliseconds(250));
    ASSERT_FALSE(command.has_value()) << "batch " << batch << ": " << command->DebugString();
  }
  EXPECT_EQ(job(id).state(), v1::JOB_STATE_RUNNING);
  // Then its batches stop.
  const std::optional<v1::TaskCommand> cancel = rank->next(std::chrono::seconds(10));
  ASSERT_TRUE(cancel.has_value() && cancel->has_cancel());
  EXPECT_THAT(cancel->cancel().reason(),
              testing::HasSubstr("made no progress: rank 0 reported no step after step 4 for "));
}

}  // namespace
}  // namespace mixtrain::server
