// Why: every key of the job spec's sections (DESIGN.md §4) beside the
// member it sets, in one list, so that each form of the spec (the YAML
// users write, read in jobspec/; the JSON the coordinator hands a task,
// job_spec_json.h) spells and types every key alike.
#pragma once

#include <string_view>

#include "engine/config/job_spec.h"

namespace mixtrain::config {

// Calls visit(section, key, section_member, field_member) for every key
// below a section, section by section in §4 order, e.g. visit("train",
// "steps", &JobSpec::train, &TrainSpec::steps). The top-level keys (name,
// and the YAML's version) are not listed.
template <class Visitor>
void for_each_section_field(Visitor&& visit) {
  visit("model", "arch", &JobSpec::model, &ModelSpec::arch);
  visit("model", "layers", &JobSpec::model, &ModelSpec::layers);
  visit("model", "heads", &JobSpec::model, &ModelSpec::heads);
  visit("model", "dim", &JobSpec::model, &ModelSpec::dim);
  visit("model", "seq_len", &JobSpec::model, &ModelSpec::seq_len);
  visit("model", "vocab", &JobSpec::model, &ModelSpec::vocab);
  visit("model", "init_from", &JobSpec::model, &ModelSpec::init_from);
  visit("data", "train", &JobSpec::data, &DataSpec::train);
  visit("data", "val", &JobSpec::data, &DataSpec::val);
  visit("data", "val_fraction", &JobSpec::data, &DataSpec::val_fraction);
  visit("data", "format", &JobSpec::data, &DataSpec::format);
  visit("train", "steps", &JobSpec::train, &TrainSpec::steps);
  visit("train", "micro_batch", &JobSpec::train, &TrainSpec::micro_batch);
  visit("train", "grad_accum", &JobSpec::train, &TrainSpec::grad_accum);
  visit("train", "lr", &JobSpec::train, &TrainSpec::lr);
  visit("train", "min_lr", &JobSpec::train, &TrainSpec::min_lr);
  visit("train", "warmup_steps", &JobSpec::train, &TrainSpec::warmup_steps);
  visit("train", "weight_decay", &JobSpec::train, &TrainSpec::weight_decay);
  visit("train", "betas", &JobSpec::train, &TrainSpec::betas);
  visit("train", "grad_clip", &JobSpec::train, &TrainSpec::grad_clip);
  visit("train", "seed", &JobSpec::train, &TrainSpec::seed);
  visit("train", "eval_every", &JobSpec::train, &TrainSpec::eval_every);
  visit("train", "eval_batches", &JobSpec::train, &TrainSpec::eval_batches);
  visit("train", "activation_checkpointing", &JobSpec::train, &TrainSpec::activation_checkpointing);
  visit("precision", "compute", &JobSpec::precision, &PrecisionSpec::compute);
  visit("precision", "loss_scale", &JobSpec::precision, &PrecisionSpec::loss_scale);
  visit("precision", "init_scale", &JobSpec::precision, &PrecisionSpec::init_scale);
  visit("precision", "growth_factor", &JobSpec::precision, &PrecisionSpec::growth_factor);
  visit("precision", "backoff_factor", &JobSpec::precision, &PrecisionSpec::backoff_factor);
  visit("precision", "growth_interval", &JobSpec::precision, &PrecisionSpec::growth_interval);
  visit("precision", "hysteresis", &JobSpec::precision, &PrecisionSpec::hysteresis);
  visit("precision", "min_scale", &JobSpec::precision, &PrecisionSpec::min_scale);
  visit("precision", "max_scale", &JobSpec::precision, &PrecisionSpec::max_scale);
  visit("precision", "on_min_scale", &JobSpec::precision, &PrecisionSpec::on_min_scale);
  visit("precision", "tf32", &JobSpec::precision, &PrecisionSpec::tf32);
  visit("precision", "stats_every", &JobSpec::precision, &PrecisionSpec::stats_every);
  visit("precision", "fp8", &JobSpec::precision, &PrecisionSpec::fp8);
  visit("zero", "stage", &JobSpec::zero, &ZeroSpec::stage);
  visit("zero", "offload_optimizer", &JobSpec::zero, &ZeroSpec::offload_optimizer);
  visit("zero", "offload_params", &JobSpec::zero, &ZeroSpec::offload_params);
  visit("zero", "bucket_mb", &JobSpec::zero, &ZeroSpec::bucket_mb);
  visit("zero", "reduce_dtype", &JobSpec::zero, &ZeroSpec::reduce_dtype);
  visit("resources", "workers", &JobSpec::resources, &ResourcesSpec::workers);
  visit("resources", "backend", &JobSpec::resources, &ResourcesSpec::backend);
  visit("scheduling", "priority", &JobSpec::scheduling, &SchedulingSpec::priority);
  visit("scheduling", "preemptible", &JobSpec::scheduling, &SchedulingSpec::preemptible);
  visit("checkpoint", "every", &JobSpec::checkpoint, &CheckpointSpec::every);
  visit("checkpoint", "keep", &JobSpec::checkpoint, &CheckpointSpec::keep);
  visit("checkpoint", "dir", &JobSpec::checkpoint, &CheckpointSpec::dir);
  visit("retries", "max_restarts", &JobSpec::retries, &RetriesSpec::max_restarts);
}

// Calls visit(section, key, flag) for every key a spec may write `auto`
// (AutoKeys), e.g. visit("zero", "stage", &AutoKeys::zero_stage).
template <class Visitor>
void for_each_auto_key(Visitor&& visit) {
  visit("zero", "stage", &AutoKeys::zero_stage);
  visit("zero", "offload_optimizer", &AutoKeys::offload_optimizer);
  visit("zero", "offload_params", &AutoKeys::offload_params);
  visit("train", "activation_checkpointing", &AutoKeys::activation_checkpointing);
}

}  // namespace mixtrain::config
