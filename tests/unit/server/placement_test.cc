// Why: placement is the scheduler's policy, a pure function: which queued
// job starts on which idle workers, and what a waiting job is told. These
// pin it without a coordinator: backend and memory fit, rank order,
// no worker used twice, later jobs passing one that cannot start, and the
// wait reasons users read in `mixtrain status`.
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
  return {id, JobNeeds{.workers = workers, .backend = backend, .states = {1e6, bytes, 0}}};
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
            "3.73 GiB of model states for 1e+06 parameters at zero.stage 0; 1 registered "
            "worker has less)");
  EXPECT_EQ(placed[2].wait_reason,
            "asks for 1 cpu workers, only 0 registered with room for a rank (each needs "
            "14.9 GiB of model states for 1e+06 parameters at zero.stage 0; 1 registered "
            "worker has less)");
}

TEST(PlacementTest, NoJobsOrNoWorkers) {
  EXPECT_TRUE(place_jobs({}, {}).empty());
  const std::vector<Placement> placed = place_jobs({job("j", 1)}, {});
  EXPECT_EQ(placed[0].wait_reason, "asks for 1 workers, only 0 registered");
}

}  // namespace
}  // namespace mixtrain::server
