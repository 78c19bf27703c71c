// Why: every trainer test starts from the same tiny GPT on the built-in
// corpus (fast on two cores) and compares runs by their master weight bytes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/config/job_spec.h"
#include "engine/train/trainer.h"

namespace mixtrain::train_test {

// A fresh, empty directory named after the running test and `suffix`.
inline std::filesystem::path fresh_dir(const std::string& suffix) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "_" + info->name() + "_" + suffix;
  for (char& c : name)
    if (c == '/') c = '_';
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  return dir;
}

// layers 2, heads 2, dim 32, seq_len 32, micro_batch 4 on builtin:demo,
// evaluated and checkpointed only at the end, into `checkpoint_dir`.
inline config::JobSpec tiny_spec(DType compute, int64_t steps,
                                 const std::filesystem::path& checkpoint_dir) {
  config::JobSpec spec;
  spec.name = "tiny";
  spec.model = {config::ModelArch::kGpt, 2, 2, 32, 32, 256, std::nullopt};
  spec.data.train = std::string(config::kBuiltinDemoData);
  spec.train.steps = steps;
  spec.train.micro_batch = 4;
  spec.train.grad_accum = 1;
  spec.train.lr = 1e-2;
  spec.train.min_lr = 1e-3;
  spec.train.warmup_steps = std::min<int64_t>(5, steps - 1);
  spec.train.seed = 1234;
  spec.train.eval_every = 1000;
  spec.train.eval_batches = 4;
  spec.precision.compute = compute;
  spec.checkpoint.every = 1000;
  spec.checkpoint.keep = 3;
  spec.checkpoint.dir = checkpoint_dir.string();
  return spec;
}

// The master weights' bytes.
inline std::vector<float> master_of(Trainer& trainer) { return trainer.master_weights(); }

// True when a and b hold the same bits (NaN == NaN, -0 != +0).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace mixtrain::train_test
