// Why: placement is the scheduler's policy, a pure function: which queued
// job starts on which idle workers, and what a waiting job is told. These
// pin it without a coordinator: backend and memory fit, rank order,
// no worker used twice, later jobs passing one that cannot start, the
// GPU generation compute fp8 needs, and the wait reasons users read in
// `mixtrain status` (and the refusal at submit).
#include "server/placement.h"

#include <gtest/gtest.h>

namespace mixtrain::server {
namespace {

v1::Worker worker(const std::string& id, v1::Backend backend, int64_t ram,
                  v1::WorkerState state = v1::WORKER_STATE_IDLE) {
  v1::Worker out;
  out.set_id(id);
  out.set_state(state);
  out.mutable_resources()->set_backend(backend);
  out.mutable_resources()->set_memory_bytes(ram);
  return out;
}

QueuedJob job(const std::string& id, int32_t workers,
              config::BackendChoice backend = config::BackendChoice::kAuto, double bytes = 0) {
  return {id, JobNeeds{.workers = workers,
                       .backend = backend,
                       .configurations = {{plan::PlanChoice{}, {1e6, bytes, 0}}}}};
}

std::vector<const v1::Worker*> pointers(const std::vector<v1::Worker>& workers) {
  std::vector<const v1::Worker*> out;
  for (const v1::Worker& w : workers) out.push_back(&w);
  return out;
}

TEST(PlacementTest, JobsTakeIdleWorkersInOrderAndNeverTheSameTwice) {
  const std::vector<v1::Worker> workers = {
      worker("a", v1::BACKEND_CPU, 0), worker("b", v1::BACKEND_CPU, 0, v1::WORKER_STATE_BUSY),
      worker("c", v1::BACKEND_CPU, 0), worker("d", v1::BACKEND_CPU, 0)};
  const std::vector<Placement> placed =
      place_jobs({job("first", 2), job("second", 1), job("third", 1)}, pointers(workers));
  ASSERT_EQ(placed.size(), 3u);
  EXPECT_EQ(placed[0].workers, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(placed[1].workers, (std::vector<size_t>{3}));
  EXPECT_TRUE(placed[2].workers.empty());
  EXPECT_EQ(placed[2].wait_reason, "waiting for 1 idle workers, 0 idle now");
}

TEST(PlacementTest, AJobThatCannotStartLetsLaterOnesThatCanGoFirst) {
  const std::vector<v1::Worker> workers = {worker("a", v1::BACKEND_CPU, 0),
                                           worker("b", v1::BACKEND_CPU, 0)};
  const std::vector<Placement> placed =
      place_jobs({job("big", 3), job("small", 2)}, pointers(workers));
  EXPECT_TRUE(placed[0].workers.empty());
  EXPECT_EQ(placed[0].wait_reason, "asks for 3 workers, only 2 registered");
  EXPECT_EQ(placed[1].workers, (std::vector<size_t>{0, 1}));
}

TEST(PlacementTest, BackendAndMemoryDecideWhereARankFits) {
  std::vector<v1::Worker> workers = {worker("cpu", v1::BACKEND_CPU, 8e9),
                                     worker("small", v1::BACKEND_CUDA, 8e9),
                                     worker("gpu", v1::BACKEND_CUDA, 8e9),
                                     worker("lost", v1::BACKEND_CUDA, 8e9, v1::WORKER_STATE_LOST)};
  for (auto [index, gpu_bytes] : {std::pair{1, 1e9}, std::pair{2, 80e9}, std::pair{3, 80e9}}) {
    v1::CudaDevice* device = workers[index].mutable_resources()->add_cuda_devices();
    device->set_memory_bytes(static_cast<int64_t>(gpu_bytes));
  }
  const std::vector<Placement> placed =
      place_jobs({job("cuda", 1, config::BackendChoice::kCuda, 4e9),
                  job("two", 2, config::BackendChoice::kCuda, 4e9),
                  job("cpu", 1, config::BackendChoice::kCpu, 16e9)},
                 pointers(workers));
  EXPECT_EQ(placed[0].workers, (std::vector<size_t>{2}));
  EXPECT_EQ(placed[1].wait_reason,
            "asks for 2 cuda workers, only 1 registered with room for a rank (each needs "
            "3.73 GiB for 1e+06 parameters at zero.stage 0; 1 registered "
            "worker has less)");
  EXPECT_EQ(placed[2].wait_reason,
            "asks for 1 cpu workers, only 0 registered with room for a rank (each needs "
            "14.9 GiB for 1e+06 parameters at zero.stage 0; 1 registered "
            "worker has less)");
}

// A job with `auto` keys starts in the cheapest configuration (the first)
// that enough idle workers hold: the cheap one on large workers, the
// frugal one when only small workers are idle; it waits only when no
// configuration fits, and its wait reason names the smallest.
TEST(PlacementTest, AnAutoJobStartsInTheCheapestConfigurationItsWorkersHold) {
  const plan::PlanChoice stage1{1};
  const plan::PlanChoice stage3{3, config::OffloadTarget::kCpu};
  QueuedJob automatic{
      "auto", JobNeeds{.workers = 2,
                       .backend = config::BackendChoice::kCpu,
                       .configurations = {{stage1, {1e6, 6e9, 0}}, {stage3, {1e6, 1e9, 2e9}}}}};
  const std::vector<v1::Worker> large = {worker("a", v1::BACKEND_CPU, 8e9),
                                         worker("b", v1::BACKEND_CPU, 8e9)};
  std::vector<Placement> placed = place_jobs({automatic}, pointers(large));
  EXPECT_EQ(placed[0].workers, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(placed[0].configuration, 0u);
  // One large worker busy: the other and a small one hold only stage 3.
  const std::vector<v1::Worker> mixed = {worker("a", v1::BACKEND_CPU, 8e9, v1::WORKER_STATE_BUSY),
                                         worker("b", v1::BACKEND_CPU, 8e9),
                                         worker("small", v1::BACKEND_CPU, 4e9)};
  placed = place_jobs({automatic}, pointers(mixed));
  EXPECT_EQ(placed[0].workers, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(placed[0].configuration, 1u);
  const std::vector<v1::Worker> tiny = {worker("a", v1::BACKEND_CPU, 2e9),
                                        worker("b", v1::BACKEND_CPU, 2e9)};
  placed = place_jobs({automatic}, pointers(tiny));
  EXPECT_TRUE(placed[0].workers.empty());
  EXPECT_EQ(placed[0].wait_reason,
            "asks for 2 cpu workers, only 0 registered with room for a rank (each needs at least "
            "0.931 GiB plus 1.86 GiB in host memory for 1e+06 parameters at zero.stage 3 + "
            "offload_optimizer cpu; 2 registered workers have less)");
}

// Preemption frees the fewest workers of the lowest priorities, newest
// first within one, never a job of the same or a higher priority or one
// not preemptible, counts workers already stopping as free, and names no
// victim when even all of them would not make room.
TEST(PlacementTest, PreemptionTakesTheLowestPrioritiesNewestFirstAndOnlyWhatItNeeds) {
  const std::vector<v1::Worker> workers = {worker("a", v1::BACKEND_CPU, 0, v1::WORKER_STATE_BUSY),
                                           worker("b", v1::BACKEND_CPU, 0, v1::WORKER_STATE_BUSY),
                                           worker("c", v1::BACKEND_CPU, 0, v1::WORKER_STATE_BUSY),
                                           worker("d", v1::BACKEND_CPU, 0, v1::WORKER_STATE_BUSY)};
  const std::vector<bool> taken(workers.size());
  QueuedJob high = job("high", 2);
  high.needs.priority = 5;
  const std::vector<RunningJob> running = {
      {.id = "old-low", .priority = 1, .started_unix_ms = 100, .workers = {0}},
      {.id = "new-low", .priority = 1, .started_unix_ms = 200, .workers = {1}},
      {.id = "lowest", .priority = 0, .started_unix_ms = 50, .workers = {2}},
      {.id = "equal", .priority = 5, .started_unix_ms = 10, .workers = {3}}};
  Preemption plan = plan_preemption(high, running, pointers(workers), taken);
  EXPECT_TRUE(plan.fits);
  EXPECT_EQ(plan.victims, (std::vector<std::string>{"lowest", "new-low"}));

  // One already stopping counts: only one more is needed.
  std::vector<RunningJob> stopping = running;
  stopping[0].stopping = true;
  plan = plan_preemption(high, stopping, pointers(workers), taken);
  EXPECT_EQ(plan.victims, (std::vector<std::string>{"lowest"}));
  stopping[2].stopping = true;
  plan = plan_preemption(high, stopping, pointers(workers), taken);
  EXPECT_TRUE(plan.fits);
  EXPECT_TRUE(plan.victims.empty());

  // Not preemptible, or all of them too few: nobody is preempted.
  std::vector<RunningJob> pinned = running;
  for (RunningJob& r : pinned) r.preemptible = false;
  plan = plan_preemption(high, pinned, pointers(workers), taken);
  EXPECT_FALSE(plan.fits);
  EXPECT_TRUE(plan.victims.empty());
  QueuedJob huge = job("huge", 4);
  huge.needs.priority = 5;
  plan = plan_preemption(huge, running, pointers(workers), taken);
  EXPECT_FALSE(plan.fits);
  EXPECT_TRUE(plan.victims.empty());
}

// A CUDA worker with a GPU given as sm_<capability> (0: not reported).
v1::Worker gpu_worker(const std::string& id, int capability,
                      v1::WorkerState state = v1::WORKER_STATE_IDLE) {
  v1::Worker out = worker(id, v1::BACKEND_CUDA, 0, state);
  v1::CudaDevice* device = out.mutable_resources()->add_cuda_devices();
  device->set_name(capability >= 89 ? "NVIDIA H100" : "NVIDIA A100");
  device->set_compute_capability_major(capability / 10);
  device->set_compute_capability_minor(capability % 10);
  return out;
}

QueuedJob fp8_job(const std::string& id, int32_t workers, config::BackendChoice backend) {
  QueuedJob out = job(id, workers, backend);
  out.needs.min_compute_capability = kFp8ComputeCapability;
  return out;
}

TEST(PlacementTest, Fp8RanksGoOnlyToSm89OrNewerGpus) {
  const std::vector<v1::Worker> workers = {gpu_worker("ampere", 80), gpu_worker("ada", 89),
                                           gpu_worker("unknown", 0), gpu_worker("hopper", 90),
                                           worker("cpu", v1::BACKEND_CPU, 0)};
  const std::vector<Placement> placed =
      place_jobs({fp8_job("fp8", 2, config::BackendChoice::kCuda),
                  fp8_job("more", 4, config::BackendChoice::kCuda), job("bf16", 1)},
                 pointers(workers));
  // "unknown" reports no generation: the rank's own check at start decides.
  EXPECT_EQ(placed[0].workers, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(placed[1].wait_reason,
            "asks for 4 cuda workers, only 3 registered with a GPU of sm_89 or newer (1 "
            "registered worker has an older one)");
  EXPECT_EQ(placed[2].workers, (std::vector<size_t>{0}));  // any GPU runs bf16

  // Only Ampere registered: waits on the GPU generation.
  const std::vector<v1::Worker> old = {gpu_worker("a", 80), gpu_worker("b", 80)};
  EXPECT_EQ(
      place_jobs({fp8_job("fp8", 1, config::BackendChoice::kCuda)}, pointers(old))[0].wait_reason,
      "asks for 1 cuda workers, only 0 registered with a GPU of sm_89 or newer (2 "
      "registered workers have an older one)");
}

TEST(PlacementTest, SubmitRefusesFp8WhenEveryRegisteredGpuIsOlderThanSm89) {
  const QueuedJob fp8 = fp8_job("fp8", 1, config::BackendChoice::kCuda);
  EXPECT_EQ(device_refusal(fp8.needs, {gpu_worker("w1", 80), gpu_worker("w2", 86),
                                       gpu_worker("gone", 90, v1::WORKER_STATE_LOST)}),
            "compute fp8 needs a GPU of sm_89 or newer (fp8 tensor cores: Ada, Hopper, "
            "Blackwell); every registered cuda worker has an older one: w1 cuda:0 (NVIDIA "
            "A100, sm_80), w2 cuda:0 (NVIDIA A100, sm_86)");
  // One new GPU, none registered, a CPU-or-CUDA job, or not fp8: no refusal.
  EXPECT_EQ(device_refusal(fp8.needs, {gpu_worker("w1", 80), gpu_worker("w2", 90)}), "");
  EXPECT_EQ(device_refusal(fp8.needs, {worker("cpu", v1::BACKEND_CPU, 0)}), "");
  EXPECT_EQ(device_refusal(fp8_job("auto", 1, config::BackendChoice::kAuto).needs,
                           {gpu_worker("w1", 80)}),
            "");
  EXPECT_EQ(
      device_refusal(job("bf16", 1, config::BackendChoice::kCuda).needs, {gpu_worker("w1", 80)}),
      "");
}

TEST(PlacementTest, NoJobsOrNoWorkers) {
  EXPECT_TRUE(place_jobs({}, {}).empty());
  const std::vector<Placement> placed = place_jobs({job("j", 1)}, {});
  EXPECT_EQ(placed[0].wait_reason, "asks for 1 workers, only 0 registered");
}

}  // namespace
}  // namespace mixtrain::server
