// Why: training runs in a child process so that nothing it does can take
// the agent down. These tests start the real mixtrain-worker binary in
// task mode on a tiny job and check what the agent gets back: every step
// and evaluation, the output lines, the summary, and for a failing child
// the cause (exit code with its last stderr line, the killing signal), a
// cancel that stops training, and SIGKILL for a child ignoring SIGTERM.
#include "worker/task_runner.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>

#include "engine/checkpoint/checkpoint_store.h"
#include "test_support/temp_dir.h"
#include "test_worker_service.h"
#include "worker/task_child.h"
#include "tiny_task.h"

namespace mixtrain::worker {
namespace {

using std::chrono::seconds;

using testing::tiny_spec;

TaskLaunch launch_for(const config::JobSpec& spec, const std::string& checkpoint_dir) {
  TaskLaunch launch;
  launch.task = testing::tiny_task(spec, checkpoint_dir);
  launch.backend = "cpu";
  launch.connection.address = "127.0.0.1:1";  // unused at world size 1
  return launch;
}

// Everything a runner reported, and a way to wait for its end.
class Recorder {
 public:
  TaskEvents events() {
    TaskEvents out;
    out.on_step = [this](const StepReport& step) { add([&] { steps_.push_back(step); }); };
    out.on_eval = [this](const EvalProgress& eval) { add([&] { evals_.push_back(eval); }); };
    out.on_eval_batch = [this](const EvalBatchProgress& batch) {
      add([&] { eval_batches_.push_back(batch); });
    };
    out.on_output = [this](const std::string& line) { add([&] { lines_.push_back(line); }); };
    out.on_finished = [this](const TaskResult& result) { add([&] { result_ = result; }); };
    return out;
  }
  // Waits up to `timeout` for the first step; false if none came.
  bool wait_for_step(seconds timeout) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, timeout, [&] { return !steps_.empty() || result_; });
  }
  // The result, waiting up to `timeout`; FAILED "timed out" if none came.
  TaskResult result(seconds timeout) {
    std::unique_lock lock(mu_);
    if (!changed_.wait_for(lock, timeout, [&] { return result_.has_value(); }))
      return TaskResult{v1::TASK_OUTCOME_UNSPECIFIED, "timed out", std::nullopt};
    return *result_;
  }
  std::vector<StepReport> steps() {
    std::lock_guard lock(mu_);
    return steps_;
  }
  std::vector<EvalProgress> evals() {
    std::lock_guard lock(mu_);
    return evals_;
  }
  std::vector<EvalBatchProgress> eval_batches() {
    std::lock_guard lock(mu_);
    return eval_batches_;
  }
  std::string output() {
    std::lock_guard lock(mu_);
    std::string out;
    for (const std::string& line : lines_) out += line + "\n";
    return out;
  }

 private:
  template <typename F>
  void add(F f) {
    std::lock_guard lock(mu_);
    f();
    changed_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<StepReport> steps_;
  std::vector<EvalProgress> evals_;
  std::vector<EvalBatchProgress> eval_batches_;
  std::vector<std::string> lines_;
  std::optional<TaskResult> result_;
};

// An executable shell script in `dir` standing in for a task process that
// misbehaves in a way real training can only do by accident.
std::string script(const test_support::TempDir& dir, const std::string& body) {
  const std::string path = dir.write("task.sh", "#!/bin/sh\n" + body);
  ::chmod(path.c_str(), 0755);
  return path;
}

// The pids of this process's children (the task processes).
std::vector<pid_t> child_pids() {
  std::vector<pid_t> out;
  DIR* proc = ::opendir("/proc");
  while (dirent* entry = ::readdir(proc)) {
    std::ifstream stat(std::string("/proc/") + entry->d_name + "/stat");
    std::string text;
    if (!std::getline(stat, text)) continue;
    std::istringstream fields(text.substr(text.rfind(')') + 2));
    char state;
    pid_t parent = 0;
    fields >> state >> parent;
    if (parent == ::getpid()) out.push_back(std::stoi(entry->d_name));
  }
  ::closedir(proc);
  return out;
}

TEST(TaskRunnerTest, TinyTaskReportsStepsEvalsOutputAndSummary) {
  test_support::TempDir dir;
  Recorder recorder;
  TaskRunner runner(MIXTRAIN_WORKER_BINARY, launch_for(tiny_spec(10), dir.path("ckpt")),
                    recorder.events());
  const TaskResult result = recorder.result(seconds(120));
  ASSERT_EQ(result.outcome, v1::TASK_OUTCOME_SUCCEEDED) << result.message << "\n"
                                                        << recorder.output();
  EXPECT_TRUE(result.message.empty());
  const std::vector<StepReport> steps = recorder.steps();
  ASSERT_EQ(steps.size(), 10u);
  EXPECT_EQ(steps.back().progress.step, 10);
  EXPECT_EQ(steps.back().progress.steps, 10);
  EXPECT_GT(steps.back().progress.loss, 0.0);
  EXPECT_GT(steps.back().rank_tokens, 0.0);
  EXPECT_GT(steps.back().model_flops, 0.0);
  EXPECT_GT(steps.back().memory.peak_total[0], 0u);
  ASSERT_EQ(recorder.evals().size(), 2u);
  EXPECT_EQ(recorder.evals()[1].step, 10);
  // Each evaluation said it was under way with its first batch at least.
  const std::vector<EvalBatchProgress> batches = recorder.eval_batches();
  ASSERT_GE(batches.size(), 2u);
  EXPECT_EQ(batches.front().done, 1);
  EXPECT_GT(batches.front().batches, 0);
  EXPECT_EQ(batches.back().step, 10);
  EXPECT_NE(recorder.output().find("step 10/10"), std::string::npos) << recorder.output();

  ASSERT_TRUE(result.summary.has_value());
  const TrainSummary& summary = *result.summary;
  EXPECT_EQ(summary.status, "succeeded");
  EXPECT_EQ(summary.steps, 10);
  ASSERT_EQ(summary.ranks.size(), 1u);
  EXPECT_EQ(summary.ranks[0].rank, 0);
  EXPECT_TRUE(std::filesystem::exists(dir.path("ckpt")));
}

TEST(TaskRunnerTest, ResumeContinuesFromTheNewestCheckpoint) {
  test_support::TempDir dir;
  {
    Recorder first;
    TaskRunner runner(MIXTRAIN_WORKER_BINARY, launch_for(tiny_spec(5), dir.path("ckpt")),
                      first.events());
    ASSERT_EQ(first.result(seconds(120)).outcome, v1::TASK_OUTCOME_SUCCEEDED) << first.output();
  }
  TaskLaunch again = launch_for(tiny_spec(8), dir.path("ckpt"));
  again.task.set_attempt(2);
  again.task.set_resume(true);
  Recorder second;
  TaskRunner runner(MIXTRAIN_WORKER_BINARY, again, second.events());
  const TaskResult result = second.result(seconds(120));
  ASSERT_EQ(result.outcome, v1::TASK_OUTCOME_SUCCEEDED) << result.message << second.output();
  ASSERT_EQ(second.steps().size(), 3u);
  EXPECT_EQ(second.steps().front().progress.step, 6);
}

TEST(TaskRunnerTest, TwoRanksRendezvousThroughTheCoordinatorStore) {
  testing::TestWorkerService service;
  testing::TestServer server(service);
  ASSERT_TRUE(server.start());
  test_support::TempDir dir;
  constexpr int kWorld = 2;
  std::vector<std::unique_ptr<Recorder>> recorders;
  std::vector<std::unique_ptr<TaskRunner>> runners;
  for (int rank = 0; rank < kWorld; ++rank) {
    TaskLaunch launch = launch_for(tiny_spec(4), dir.path("ckpt"));
    launch.task.set_rank(rank);
    launch.task.set_world_size(kWorld);
    launch.task.set_rendezvous_scope("job-1/attempt-1");
    launch.connection.address = server.address();
    recorders.push_back(std::make_unique<Recorder>());
    runners.push_back(
        std::make_unique<TaskRunner>(MIXTRAIN_WORKER_BINARY, launch, recorders.back()->events()));
  }
  for (int rank = 0; rank < kWorld; ++rank) {
    Recorder& recorder = *recorders[rank];
    const TaskResult result = recorder.result(seconds(120));
    ASSERT_EQ(result.outcome, v1::TASK_OUTCOME_SUCCEEDED) << result.message << recorder.output();
    ASSERT_TRUE(result.summary.has_value());
    const TrainSummary& summary = *result.summary;
    EXPECT_EQ(summary.world_size, kWorld);
    ASSERT_EQ(summary.ranks.size(), 1u);  // its own entry: the coordinator merges them
    EXPECT_EQ(summary.ranks[0].rank, rank);
    EXPECT_GT(summary.ranks[0].comm_bytes_per_step, 0);
    EXPECT_GT(recorder.steps().back().comm[CommOp::kAllReduce].bytes_sent, 0);
  }
}

TEST(TaskRunnerTest, RelativeDataPathsResolveInTheDataRoot) {
  test_support::TempDir dir;
  std::string corpus;
  for (int i = 0; i < 200; ++i) corpus += "to be or not to be, that is the question. ";
  dir.write("corpus.txt", corpus);
  TaskLaunch launch = launch_for(tiny_spec(3, "corpus.txt"), dir.path("ckpt"));
  launch.task.set_data_root(dir.path().string());
  Recorder recorder;
  TaskRunner runner(MIXTRAIN_WORKER_BINARY, launch, recorder.events());
  const TaskResult result = recorder.result(seconds(120));
  EXPECT_EQ(result.outcome, v1::TASK_OUTCOME_SUCCEEDED) << result.message << "\n"
                                                        << recorder.output();
}

TEST(TaskRunnerTest, InvalidSpecFailsNamingTheKey) {
  test_support::TempDir dir;
  Recorder recorder;
  TaskRunner runner(MIXTRAIN_WORKER_BINARY,
                    launch_for(tiny_spec(3, "builtin:demo", /*heads=*/5), dir.path("ckpt")),
                    recorder.events());
  const TaskResult result = recorder.result(seconds(60));
  EXPECT_EQ(result.outcome, v1::TASK_OUTCOME_FAILED);
  EXPECT_NE(result.message.find("rank 0 exited with code 2: "), std::string::npos)
      << result.message;
  EXPECT_NE(result.message.find("model.heads"), std::string::npos) << result.message;
  EXPECT_FALSE(result.summary.has_value());
}

// A real training task that will not end on its own, already past its first step.
class LongTaskTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(recorder_.wait_for_step(seconds(60))) << recorder_.output(); }

  test_support::TempDir dir_;
  Recorder recorder_;
  TaskRunner runner_{MIXTRAIN_WORKER_BINARY, launch_for(tiny_spec(1000000), dir_.path("ckpt")),
                     recorder_.events()};
};

TEST_F(LongTaskTest, TrainingKilledBySigkillIsReportedWithTheSignal) {
  const std::vector<pid_t> children = child_pids();
  ASSERT_EQ(children.size(), 1u);
  ::kill(children[0], SIGKILL);  // what the kernel's OOM killer does
  const TaskResult result = recorder_.result(seconds(30));
  EXPECT_EQ(result.outcome, v1::TASK_OUTCOME_FAILED);
  EXPECT_EQ(result.message.rfind("rank 0 killed by signal 9 (SIGKILL)", 0), 0u) << result.message;
}

// Preemption: the training process checkpoints the step it is at and
// stops; the outcome says so (the code it exits with means nothing else
// unless the task was asked).
TEST_F(LongTaskTest, PreemptCheckpointsTheCurrentStepAndReportsPreempted) {
  runner_.preempt();
  const TaskResult result = recorder_.result(seconds(60));
  EXPECT_EQ(result.outcome, v1::TASK_OUTCOME_PREEMPTED) << result.message;
  ASSERT_TRUE(result.summary.has_value());
  EXPECT_EQ(result.summary->status, "preempted");
  EXPECT_EQ(result.message, "rank 0 stopped after checkpointing step " +
                                std::to_string(result.summary->steps) + " (preempted)");
  const std::optional<CheckpointInfo> latest = latest_checkpoint(dir_.path("ckpt"));
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, result.summary->steps);
}

// Issue 29: the ranks of a job stop together at the step they agree on, as
// soon as any of them was asked; a rank whose own request is still on its
// way (its agent slower than a peer's) checkpointed and stopped all the
// same, and is preempted, not failed with "exited with code 3".
TEST_F(LongTaskTest, ARankStoppedByTheAgreementBeforeItsOwnRequestIsPreempted) {
  const std::vector<pid_t> children = child_pids();
  ASSERT_EQ(children.size(), 1u);
  ASSERT_EQ(::kill(children[0], kPreemptSignal), 0);  // what a peer's request leads to
  const TaskResult result = recorder_.result(seconds(60));
  EXPECT_EQ(result.outcome, v1::TASK_OUTCOME_PREEMPTED) << result.message;
  ASSERT_TRUE(result.summary.has_value());
  const std::optional<CheckpointInfo> latest = latest_checkpoint(dir_.path("ckpt"));
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, result.summary->steps);
}

TEST(TaskRunnerTest, NonZeroExitIsReportedWithTheLastStderrLine) {
  test_support::TempDir dir;
  Recorder recorder;
  TaskRunner runner(script(dir,
                           "cat >/dev/null\necho progress\necho first >&2\n"
                           "echo 'out of disk' >&2\nexit 3\n"),
                    launch_for(tiny_spec(3), dir.path("ckpt")), recorder.events());
  const TaskResult result = recorder.result(seconds(30));
  EXPECT_EQ(result.outcome, v1::TASK_OUTCOME_FAILED);
  EXPECT_EQ(result.message, "rank 0 exited with code 3: out of disk");
  EXPECT_EQ(recorder.output(), "progress\nfirst\nout of disk\n");
}

TEST_F(LongTaskTest, CancelStopsTrainingAndReportsCancelled) {
  const auto start = std::chrono::steady_clock::now();
  runner_.cancel("user asked");
  const TaskResult result = recorder_.result(seconds(30));
  EXPECT_EQ(result.outcome, v1::TASK_OUTCOME_CANCELLED);
  EXPECT_EQ(result.message, "rank 0 cancelled: user asked");
  EXPECT_LT(std::chrono::steady_clock::now() - start, TaskRunner::kKillGrace);
}

TEST(TaskRunnerTest, ChildIgnoringSigtermIsKilledAfterTheGrace) {
  test_support::TempDir dir;
  Recorder recorder;
  TaskRunner runner(script(dir, "trap '' TERM\necho ready\nwhile true; do sleep 0.1; done\n"),
                    launch_for(tiny_spec(3), dir.path("ckpt")), recorder.events());
  for (int i = 0; i < 100 && recorder.output().empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = std::chrono::steady_clock::now();
  runner.cancel("stop now");
  const TaskResult result = recorder.result(seconds(30));
  EXPECT_EQ(result.outcome, v1::TASK_OUTCOME_CANCELLED);
  EXPECT_GE(std::chrono::steady_clock::now() - start, TaskRunner::kKillGrace);
}

// Issue 17: a rank holds its worker's --memory-limit; past it the task
// fails as out of memory, naming the category, instead of being killed.
TEST(TaskRunnerTest, ARankPastItsWorkersMemoryLimitFailsAsOutOfMemory) {
  test_support::TempDir dir;
  Recorder recorder;
  TaskLaunch launch = launch_for(tiny_spec(3), dir.path("ckpt"));
  launch.memory_limit = 64 << 10;  // 64 KiB: the model states alone need more
  TaskRunner runner(MIXTRAIN_WORKER_BINARY, std::move(launch), recorder.events());
  const TaskResult result = recorder.result(seconds(60));
  EXPECT_EQ(result.outcome, v1::TASK_OUTCOME_FAILED);
  EXPECT_NE(result.message.find("out of memory: needed "), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("past this rank's memory limit of 6.1e-05 GiB (its worker's "
                                "--memory-limit)"),
            std::string::npos)
      << result.message;
}

// Issue 29: 1.2 GB of text trained on a 1 GiB worker with 2.6 GB of RSS.
// The corpus is mapped, not copied: a text file larger than the rank's
// whole limit trains within it, and no data is counted.
TEST(TaskRunnerTest, ATextFileLargerThanTheMemoryLimitTrainsWithinItMapped) {
  test_support::TempDir dir;
  std::string text;
  for (int i = 0; text.size() < (size_t{12} << 20); ++i)
    text += "line " + std::to_string(i) + ": the quick fox chases the old owl.\n";
  Recorder recorder;
  TaskLaunch launch = launch_for(tiny_spec(3, dir.write("big.txt", text)), dir.path("ckpt"));
  launch.memory_limit = 8 << 20;  // 8 MiB: the model needs far less, the text more
  TaskRunner runner(MIXTRAIN_WORKER_BINARY, std::move(launch), recorder.events());
  const TaskResult result = recorder.result(seconds(60));
  ASSERT_EQ(result.outcome, v1::TASK_OUTCOME_SUCCEEDED) << result.message;
  ASSERT_TRUE(result.summary.has_value());
  const MemoryReport& memory = result.summary->ranks.at(0).memory;
  EXPECT_EQ(
      memory.peak[static_cast<int>(MemoryPool::kHost)][static_cast<int>(MemoryCategory::kData)],
      0u);
  EXPECT_LE(memory.peak_total[0] + memory.peak_total[1], size_t{8} << 20);
}

// Issue 29: ranks killed mid-checkpoint left step_N.tmp-* behind after a
// cancel. Once its child is gone the agent removes what this attempt (1)
// and earlier ones were building, and nothing of a newer attempt.
TEST(TaskRunnerTest, AnEndedAttemptsUnfinishedCheckpointsAreRemoved) {
  test_support::TempDir dir;
  const std::filesystem::path checkpoints = dir.path("ckpt");
  const std::filesystem::path mine = checkpoint_temporary_dir(checkpoints, 5, 1);
  const std::filesystem::path earlier = checkpoint_temporary_dir(checkpoints, 3, 0);
  const std::filesystem::path newer = checkpoint_temporary_dir(checkpoints, 9, 2);
  std::filesystem::create_directories(earlier);
  std::filesystem::create_directories(newer);
  Recorder recorder;
  // A rank in the middle of writing its shard when the cancel comes.
  TaskRunner runner(script(dir, "cat >/dev/null\nmkdir -p " + mine.string() + "\necho partial >" +
                                    (mine / "shard-00000-of-00002.safetensors").string() +
                                    "\necho writing\nwhile true; do sleep 0.1; done\n"),
                    launch_for(tiny_spec(3), checkpoints), recorder.events());
  for (int i = 0; i < 200 && recorder.output().empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(std::filesystem::exists(mine));
  runner.cancel("user asked");
  EXPECT_EQ(recorder.result(seconds(30)).outcome, v1::TASK_OUTCOME_CANCELLED);
  EXPECT_FALSE(std::filesystem::exists(mine));
  EXPECT_FALSE(std::filesystem::exists(earlier));
  EXPECT_TRUE(std::filesystem::exists(newer));
}

TEST(TaskRunnerTest, MissingExecutableFailsWithoutThrowing) {
  test_support::TempDir dir;
  Recorder recorder;
  TaskRunner runner(dir.path("no-such-binary"), launch_for(tiny_spec(3), dir.path("ckpt")),
                    recorder.events());
  const TaskResult result = recorder.result(seconds(30));
  EXPECT_EQ(result.outcome, v1::TASK_OUTCOME_FAILED);
  EXPECT_EQ(result.message.rfind("rank 0: cannot start the task process", 0), 0u) << result.message;
  EXPECT_NE(result.message.find("No such file or directory"), std::string::npos) << result.message;
}

TEST(DescribeExitTest, NamesCodeSignalAndLastLine) {
  EXPECT_EQ(describe_exit(1, SIGKILL, ""),
            "rank 1 killed by signal 9 (SIGKILL), possibly out of memory");
  EXPECT_EQ(describe_exit(2, SIGABRT, "assertion failed"),
            "rank 2 killed by signal 6 (SIGABRT): assertion failed");
  EXPECT_EQ(describe_exit(0, 1 << 8, "boom"), "rank 0 exited with code 1: boom");
}

}  // namespace
}  // namespace mixtrain::worker
