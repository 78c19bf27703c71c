// Why: the runner and agent tests train for real, on a job small enough to
// take well under a second per few steps on one CPU core.
#pragma once

#include <string>

#include "proto/mixtrain.pb.h"

namespace mixtrain::worker::testing {

// A GPT of one layer, dim 32, seq_len 16 on `train` data for `steps` steps,
// evaluated every 5 steps.
inline std::string tiny_spec(int steps, const std::string& train = "builtin:demo", int heads = 2) {
  return "name: tiny\nmodel: {layers: 1, heads: " + std::to_string(heads) +
         ", dim: 32, seq_len: 16}\ndata: {train: " + train +
         "}\ntrain: {steps: " + std::to_string(steps) +
         ", micro_batch: 2, warmup_steps: 2, eval_every: 5, eval_batches: 2}\n"
         "checkpoint: {every: 1000}\n";
}

// Rank 0 of 1 of attempt 1 of job-1 running `spec`.
inline v1::Task tiny_task(const std::string& spec, const std::string& checkpoint_dir) {
  v1::Task task;
  task.set_job_id("job-1");
  task.set_attempt(1);
  task.set_rank(0);
  task.set_world_size(1);
  task.set_spec_yaml(spec);
  task.set_checkpoint_dir(checkpoint_dir);
  return task;
}

}  // namespace mixtrain::worker::testing
