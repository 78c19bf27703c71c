// Why: the runner and agent tests train for real, on a job small enough to
// take well under a second per few steps on one CPU core.
#pragma once

#include <string>

#include "engine/common/json.h"
#include "engine/config/job_spec_json.h"
#include "proto/mixtrain.pb.h"

namespace mixtrain::worker::testing {

// A GPT of one layer, dim 32, seq_len 16 on `train` data for `steps` steps,
// evaluated every 5 steps (not validated: a test may make it invalid).
inline config::JobSpec tiny_spec(int steps, const std::string& train = "builtin:demo",
                                 int heads = 2) {
  config::JobSpec spec;
  spec.name = "tiny";
  spec.model.layers = 1;
  spec.model.heads = heads;
  spec.model.dim = 32;
  spec.model.seq_len = 16;
  spec.data.train = train;
  spec.train.steps = steps;
  spec.train.micro_batch = 2;
  spec.train.warmup_steps = 2;
  spec.train.eval_every = 5;
  spec.train.eval_batches = 2;
  spec.checkpoint.every = 1000;
  return spec;
}

// Rank 0 of 1 of attempt 1 of job-1 running `spec`, handed over as the
// coordinator does.
inline v1::Task tiny_task(const config::JobSpec& spec, const std::string& checkpoint_dir) {
  v1::Task task;
  task.set_job_id("job-1");
  task.set_attempt(1);
  task.set_rank(0);
  task.set_world_size(1);
  task.set_spec_json(dump_json(config::job_spec_to_json(spec)));
  task.set_checkpoint_dir(checkpoint_dir);
  return task;
}

}  // namespace mixtrain::worker::testing
