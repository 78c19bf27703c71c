// Why: see placement.h.
#include "server/placement.h"

#include <algorithm>

#include "engine/plan/plan_alternatives.h"
#include "proto/training_device.h"
#include "server/worker_registry.h"

namespace mixtrain::server {
namespace {

std::string backend_name(config::BackendChoice backend) {
  switch (backend) {
    case config::BackendChoice::kCpu:
      return "cpu ";
    case config::BackendChoice::kCuda:
      return "cuda ";
    default:
      return "";
  }
}

// major * 10 + minor of the GPU a CUDA worker trains on; 0 when unknown.
int32_t compute_capability(const v1::Resources& resources) {
  const v1::CudaDevice* device = v1::training_device(resources);
  return device == nullptr
             ? 0
             : device->compute_capability_major() * 10 + device->compute_capability_minor();
}

// False for a CUDA worker whose known GPU is older than `needs` allows.
bool device_new_enough(const JobNeeds& needs, const v1::Resources& resources) {
  const int32_t capability = compute_capability(resources);
  return resources.backend() != v1::BACKEND_CUDA || capability == 0 ||
         capability >= needs.min_compute_capability;
}

std::string sm_name(int32_t capability) { return "sm_" + std::to_string(capability); }

// Why `needs` cannot start now, given how many idle workers fit it.
std::string wait_reason(const JobNeeds& needs, size_t idle_fitting,
                        const std::vector<const v1::Worker*>& workers) {
  int64_t registered = 0;
  int64_t too_small = 0;
  int64_t too_old = 0;
  for (const v1::Worker* worker : workers) {
    if (worker->state() == v1::WORKER_STATE_LOST ||
        !backend_matches(needs.backend, worker->resources().backend())) {
      continue;
    }
    if (!device_new_enough(needs, worker->resources())) {
      ++too_old;
    } else {
      ++(holds_any_configuration(needs, worker->resources()) ? registered : too_small);
    }
  }
  const std::string kind = backend_name(needs.backend);
  if (registered >= needs.workers) {
    return "waiting for " + std::to_string(needs.workers) + " idle " + kind + "workers, " +
           std::to_string(idle_fitting) + " idle now";
  }
  std::string reason = "asks for " + std::to_string(needs.workers) + " " + kind + "workers, only " +
                       std::to_string(registered) + " registered";
  if (too_small > 0) {
    reason += " with room for a rank (" + describe_rank_memory(needs) + "; " +
              std::to_string(too_small) + " registered " +
              (too_small == 1 ? "worker has" : "workers have") + " less)";
  }
  if (too_old > 0) {
    reason += " with a GPU of " + sm_name(needs.min_compute_capability) + " or newer (" +
              std::to_string(too_old) + " registered " +
              (too_old == 1 ? "worker has" : "workers have") + " an older one)";
  }
  return reason;
}

}  // namespace

bool runs_rank(const JobNeeds& needs, const plan::RankConfiguration& configuration,
               const v1::Resources& resources) {
  return backend_matches(needs.backend, resources.backend()) &&
         holds_rank(configuration.memory, resources) && device_new_enough(needs, resources);
}

std::string device_refusal(const JobNeeds& needs, const std::vector<v1::Worker>& workers) {
  if (needs.backend != config::BackendChoice::kCuda || needs.min_compute_capability == 0) return "";
  std::string devices;
  for (const v1::Worker& worker : workers) {
    if (worker.state() == v1::WORKER_STATE_LOST ||
        worker.resources().backend() != v1::BACKEND_CUDA) {
      continue;
    }
    if (device_new_enough(needs, worker.resources())) return "";
    const v1::CudaDevice* device = v1::training_device(worker.resources());
    devices += std::string(devices.empty() ? "" : ", ") + worker.id() + " " +
               v1::training_device_name(worker.resources()) + " (" + device->name() + ", " +
               sm_name(compute_capability(worker.resources())) + ")";
  }
  if (devices.empty()) return "";
  return "compute fp8 needs a GPU of " + sm_name(needs.min_compute_capability) +
         " or newer (fp8 tensor cores: Ada, Hopper, Blackwell); every registered cuda worker "
         "has an older one: " +
         devices;
}

std::string memory_refusal(const config::JobSpec& spec, const JobNeeds& needs,
                           const std::vector<v1::Worker>& workers) {
  const v1::Worker* largest = nullptr;
  plan::MemoryBudget budget;
  for (const v1::Worker& worker : workers) {
    const v1::Resources& resources = worker.resources();
    if (worker.state() == v1::WORKER_STATE_LOST ||
        !backend_matches(needs.backend, resources.backend()) ||
        !device_new_enough(needs, resources)) {
      continue;
    }
    if (holds_any_configuration(needs, resources)) return "";
    const bool cuda = resources.backend() == v1::BACKEND_CUDA;
    const v1::CudaDevice* device = cuda ? v1::training_device(resources) : nullptr;
    const int64_t memory = device != nullptr ? device->memory_bytes() : resources.memory_bytes();
    if (largest == nullptr || memory > budget.device) {
      largest = &worker;
      budget = plan::MemoryBudget{
          .device = memory, .host = cuda ? resources.memory_bytes() : 0, .shared = !cuda};
    }
  }
  if (largest == nullptr) return "";
  std::string reason = "no registered " + backend_name(needs.backend) +
                       "worker has room for a rank (" + describe_rank_memory(needs) +
                       "); the largest, " + largest->id() + ", has " +
                       gib_text(static_cast<double>(budget.device));
  const std::vector<plan::PlanAlternative> fitting =
      plan::fitting_alternatives(spec, plan::scheduling_target(spec), budget);
  if (fitting.empty()) {
    return reason +
           "; no ZeRO stage, offload or activation checkpointing fits it: more workers or a "
           "smaller train.micro_batch would";
  }
  return reason + "; fits with " + plan::describe(fitting.front().choice);
}

bool holds_rank(const plan::RankMemory& memory, const v1::Resources& resources) {
  const double ram = double(resources.memory_bytes());
  if (resources.backend() != v1::BACKEND_CUDA) {
    return ram == 0 || memory.device + memory.host <= ram;
  }
  const v1::CudaDevice* device = v1::training_device(resources);
  const double gpu = device == nullptr ? 0 : double(device->memory_bytes());
  return (gpu == 0 || memory.device <= gpu) && (ram == 0 || memory.host <= ram);
}

bool holds_any_configuration(const JobNeeds& needs, const v1::Resources& resources) {
  return std::any_of(needs.configurations.begin(), needs.configurations.end(),
                     [&](const plan::RankConfiguration& configuration) {
                       return holds_rank(configuration.memory, resources);
                     });
}

namespace {

// Where a job's ranks go among the `usable` workers.
struct Fit {
  bool found = false;         // every rank has a worker
  size_t configuration = 0;   // the first (cheapest) configuration that does
  std::vector<size_t> ranks;  // its workers, by rank
  size_t most = 0;            // the most workers any configuration found
};

Fit fit_on(const JobNeeds& needs, const std::vector<const v1::Worker*>& workers,
           const std::vector<bool>& usable) {
  const size_t wanted = static_cast<size_t>(std::max(needs.workers, 0));
  Fit out;
  for (size_t c = 0; c < needs.configurations.size(); ++c) {
    std::vector<size_t> fitting;
    for (size_t i = 0; i < workers.size() && fitting.size() < wanted; ++i) {
      if (usable[i] && runs_rank(needs, needs.configurations[c], workers[i]->resources()))
        fitting.push_back(i);
    }
    out.most = std::max(out.most, fitting.size());
    if (fitting.size() == wanted) {
      out.found = true;
      out.configuration = c;
      out.ranks = std::move(fitting);
      return out;
    }
  }
  return out;
}

}  // namespace

Preemption plan_preemption(const QueuedJob& waiting, const std::vector<RunningJob>& running,
                           const std::vector<const v1::Worker*>& workers,
                           const std::vector<bool>& taken) {
  std::vector<bool> usable(workers.size());
  for (size_t i = 0; i < workers.size(); ++i)
    usable[i] = !taken[i] && workers[i]->state() == v1::WORKER_STATE_IDLE;
  const auto free_workers_of = [&](const RunningJob& job) {
    for (size_t i : job.workers)
      if (workers[i]->state() != v1::WORKER_STATE_LOST) usable[i] = true;
  };
  std::vector<const RunningJob*> candidates;
  for (const RunningJob& job : running) {
    if (job.stopping) {
      free_workers_of(job);
    } else if (job.preemptible && job.priority < waiting.needs.priority) {
      candidates.push_back(&job);
    }
  }
  Preemption out;
  if (fit_on(waiting.needs, workers, usable).found) {
    out.fits = true;
    return out;
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const RunningJob* a, const RunningJob* b) {
                     return std::pair(a->priority, -a->started_unix_ms) <
                            std::pair(b->priority, -b->started_unix_ms);
                   });
  for (const RunningJob* victim : candidates) {
    free_workers_of(*victim);
    out.victims.push_back(victim->id);
    if (fit_on(waiting.needs, workers, usable).found) {
      out.fits = true;
      return out;
    }
  }
  return {};
}

std::vector<Placement> place_jobs(const std::vector<QueuedJob>& jobs,
                                  const std::vector<const v1::Worker*>& workers) {
  std::vector<bool> idle(workers.size());  // not busy, lost or assigned already
  for (size_t i = 0; i < workers.size(); ++i)
    idle[i] = workers[i]->state() == v1::WORKER_STATE_IDLE;
  std::vector<Placement> placements;
  placements.reserve(jobs.size());
  for (const QueuedJob& job : jobs) {
    Placement placement{.job_id = job.id};
    Fit fit = fit_on(job.needs, workers, idle);
    if (fit.found) {
      for (size_t i : fit.ranks) idle[i] = false;
      placement.workers = std::move(fit.ranks);
      placement.configuration = fit.configuration;
    } else {
      placement.wait_reason = wait_reason(job.needs, fit.most, workers);
    }
    placements.push_back(std::move(placement));
  }
  return placements;
}

}  // namespace mixtrain::server
