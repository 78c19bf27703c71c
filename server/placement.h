// Why: deciding which queued job starts on which idle workers is the
// scheduler's one real policy, and it must be testable and measurable
// apart from locks, RPCs and the database. This is that decision as a
// pure function: queued jobs (oldest first) and the registered workers in,
// assignments and wait reasons out. A job starts when enough idle workers
// of its backend have room for a rank's planned memory in one of its
// configurations (the cheapest such, for a spec with `auto` keys); one
// that cannot start lets later ones that can go first (no head-of-line
// blocking). A CUDA worker takes a job only if its GPU is as new as the
// job needs (compute fp8: sm_89).
#pragma once

#include <string>
#include <vector>

#include "proto/mixtrain.pb.h"
#include "server/job_needs.h"

namespace mixtrain::server {

struct QueuedJob {
  std::string id;
  JobNeeds needs;
};

struct Placement {
  std::string job_id;
  // Indices into the `workers` given to place_jobs, one per rank (rank
  // order); empty when the job waits.
  std::vector<size_t> workers;
  // The index into the job's needs.configurations it starts with.
  size_t configuration = 0;
  // Why it waits ("waiting for 2 idle cpu workers, 1 idle now", "asks for
  // ...  only N registered ..."); empty when it starts.
  std::string wait_reason;
};

// One Placement per job of `jobs`, in their order. Only IDLE workers are
// assigned, each at most once; LOST ones are not counted as registered.
std::vector<Placement> place_jobs(const std::vector<QueuedJob>& jobs,
                                  const std::vector<const v1::Worker*>& workers);

// True when a worker with `resources` can run a rank of a job with
// `needs` in `configuration`: its backend, room for that configuration's
// planned memory, a new enough GPU.
bool runs_rank(const JobNeeds& needs, const plan::RankConfiguration& configuration,
               const v1::Resources& resources);

// A running attempt, as preemption weighs it.
struct RunningJob {
  std::string id;
  int32_t priority = 0;
  bool preemptible = true;
  bool stopping = false;        // already told to stop: its workers are as good as free
  int64_t started_unix_ms = 0;  // a newer one has less work since its checkpoint
  std::vector<size_t> workers;  // indices into the `workers` given with it
};

struct Preemption {
  bool fits = false;                 // `waiting` starts once the stopping jobs and `victims` stop
  std::vector<std::string> victims;  // ids of the running jobs to preempt now
};

// What it takes for `waiting`, which cannot start on the idle workers not
// `taken`, to start: the workers of jobs already stopping, then those of
// preemptible running jobs of a lower priority, lowest first and the
// newest first within one, until it would fit. `fits` is false (and no
// victim named) when even all of them would not do.
Preemption plan_preemption(const QueuedJob& waiting, const std::vector<RunningJob>& running,
                           const std::vector<const v1::Worker*>& workers,
                           const std::vector<bool>& taken);

// Why no registered worker can ever run a job with `needs` on its own
// account ("fp8 needs sm_89 or newer; the registered cuda workers have
// w1 cuda:0 (NVIDIA A100, sm_80)"), or empty: set only when the job asks
// for cuda, CUDA workers are registered and every one has an older GPU.
std::string device_refusal(const JobNeeds& needs, const std::vector<v1::Worker>& workers);

// Why no registered worker can ever hold a rank of `spec` (whose needs are
// `needs`) in any of its configurations, with the planner's way out ("no registered cpu worker has
// room for a rank (each needs 31.2 GiB for 1.3e+09 parameters at zero.stage 1); the largest, w2,
// has 16 GiB; fits with zero.stage 3 + offload_optimizer cpu"), or empty: set only when workers
// that could otherwise run it are registered and none has room.
std::string memory_refusal(const config::JobSpec& spec, const JobNeeds& needs,
                           const std::vector<v1::Worker>& workers);

// True when a worker with `resources` has room for a rank's planned
// memory: both pools in RAM on the CPU backend; on CUDA the compute pool on
// the GPU its rank trains on and the offload pool in RAM. Unknown sizes (0)
// fit.
bool holds_rank(const plan::RankMemory& memory, const v1::Resources& resources);

// True when it has room in at least one of `needs`' configurations.
bool holds_any_configuration(const JobNeeds& needs, const v1::Resources& resources);

}  // namespace mixtrain::server
