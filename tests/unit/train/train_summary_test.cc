// Why: the summary JSON is read by other programs, so it must carry every
// DESIGN.md §5 key, and its memory figures must account for every byte the
// backend's tracker counted.
#include <gtest/gtest.h>

#include "train_test_util.h"

namespace mixtrain::train_test {
namespace {

const char* const kTopKeys[] = {"name", "status", "steps", "skipped_steps", "world_size",
                                "zero_stage", "compute_dtype", "param_count",
                                "tokens_per_second", "final_train_loss", "final_val_loss",
                                "loss_scale", "nonfinite_events", "ranks"};
const char* const kDeviceKeys[] = {"params", "grads", "master_params", "optimizer_state",
                                   "activations", "gathered_params", "comm_buffers",
                                   "workspace", "peak"};
const char* const kHostKeys[] = {"master_params", "optimizer_state", "params", "peak"};

// Sum of every member of `pool` but "peak".
int64_t category_sum(const Json& pool) {
  int64_t sum = 0;
  for (const auto& [key, value] : pool.as_object())
    if (key != "peak") sum += value.as_int();
  return sum;
}

TEST(TrainSummaryTest, JsonHasEveryDesignKeyAndMemoryAddsUp) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  Trainer trainer(*backend, tiny_spec(DType::kBF16, 3, fresh_dir("ckpt")));
  const TrainSummary summary = trainer.run();
  const Json json = Json::parse(summary.to_json().dump());

  ASSERT_EQ(json.as_object().size(), std::size(kTopKeys));
  for (size_t i = 0; i < std::size(kTopKeys); ++i)
    EXPECT_EQ(json.as_object()[i].first, kTopKeys[i]);
  EXPECT_EQ(json.at("name").as_string(), "tiny");
  EXPECT_EQ(json.at("status").as_string(), "succeeded");
  EXPECT_EQ(json.at("steps").as_int(), 3);
  EXPECT_EQ(json.at("world_size").as_int(), 1);
  EXPECT_EQ(json.at("compute_dtype").as_string(), "bf16");
  EXPECT_TRUE(json.at("final_val_loss").is_double());
  EXPECT_EQ(json.at("param_count").as_int(), trainer.layout().numel());

  const Json::Array& ranks = json.at("ranks").as_array();
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].at("rank").as_int(), 0);
  EXPECT_EQ(ranks[0].at("comm_elements_per_step").as_int(), 0);
  EXPECT_EQ(ranks[0].at("comm_bytes_per_step").as_int(), 0);
  const Json& device = ranks[0].at("memory_bytes").at("device");
  const Json& host = ranks[0].at("memory_bytes").at("host");
  ASSERT_EQ(device.as_object().size(), std::size(kDeviceKeys));
  for (const char* key : kDeviceKeys) EXPECT_NE(device.find(key), nullptr) << key;
  ASSERT_EQ(host.as_object().size(), std::size(kHostKeys));
  for (const char* key : kHostKeys) EXPECT_NE(host.find(key), nullptr) << key;

  const MemoryTracker& tracker = backend->memory();
  EXPECT_EQ(category_sum(device), static_cast<int64_t>(tracker.current_total(MemoryPool::kDevice)));
  EXPECT_EQ(category_sum(host), static_cast<int64_t>(tracker.current_total(MemoryPool::kHost)));
  EXPECT_EQ(device.at("peak").as_int(),
            static_cast<int64_t>(tracker.peak_total(MemoryPool::kDevice)));
  // Model state of bf16 mixed precision (DESIGN.md §6, stage 0): 2 + 2 + 12 bytes per parameter.
  const int64_t psi = trainer.layout().numel();
  EXPECT_EQ(device.at("params").as_int(), 2 * psi);
  EXPECT_EQ(device.at("grads").as_int(), 2 * psi);
  EXPECT_EQ(device.at("master_params").as_int(), 4 * psi);
  EXPECT_EQ(device.at("optimizer_state").as_int(), 8 * psi);
  EXPECT_GT(device.at("activations").as_int(), 0);
}

TEST(TrainSummaryTest, Fp32KeepsNoSecondWeightCopyAndFp32GradsOptionWidensGrads) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  Trainer fp32(*backend, tiny_spec(DType::kF32, 1, fresh_dir("fp32")));
  const int64_t psi = fp32.layout().numel();
  const MemoryReport fp32_memory = fp32.summary("succeeded").ranks[0].memory;
  EXPECT_EQ(fp32_memory.current[0][static_cast<int>(MemoryCategory::kParams)], 0u);
  EXPECT_EQ(fp32_memory.current[0][static_cast<int>(MemoryCategory::kMasterParams)],
            static_cast<size_t>(4 * psi));

  std::unique_ptr<Backend> other = make_backend("cpu");
  TrainerOptions options;
  options.grads_fp32 = true;
  Trainer wide(*other, tiny_spec(DType::kBF16, 1, fresh_dir("wide")), options);
  const MemoryReport wide_memory = wide.summary("succeeded").ranks[0].memory;
  EXPECT_EQ(wide_memory.current[0][static_cast<int>(MemoryCategory::kGrads)],
            static_cast<size_t>(4 * psi));
  EXPECT_EQ(wide.run().steps, 1);
}

TEST(TrainSummaryTest, UnsetLossesAreNull) {
  TrainSummary summary;
  summary.ranks.push_back(RankSummary{});
  const Json json = summary.to_json();
  EXPECT_TRUE(json.at("final_train_loss").is_null());
  EXPECT_TRUE(json.at("final_val_loss").is_null());
}

}  // namespace
}  // namespace mixtrain::train_test
