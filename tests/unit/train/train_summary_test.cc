// Why: the summary JSON is read by other programs, so it must carry every
// DESIGN.md §5 key, and its memory figures must account for every byte the
// backend's tracker counted.
#include <gtest/gtest.h>

#include "engine/data/token_source.h"
#include "train_test_util.h"

namespace mixtrain::train_test {
namespace {

const char* const kTopKeys[] = {"name",
                                "status",
                                "steps",
                                "skipped_steps",
                                "world_size",
                                "zero_stage",
                                "compute_dtype",
                                "param_count",
                                "tokens_per_second",
                                "final_train_loss",
                                "final_val_loss",
                                "loss_scale",
                                "nonfinite_events",
                                "ranks"};
const char* const kDeviceKeys[] = {"params",          "grads",       "master_params",
                                   "optimizer_state", "activations", "gathered_params",
                                   "comm_buffers",    "workspace",   "peak"};
const char* const kHostKeys[] = {"master_params", "optimizer_state", "params", "data", "peak"};

// Sum of every member of `pool` but "peak".
int64_t category_sum(const Json& pool) {
  int64_t sum = 0;
  for (const auto& [key, value] : pool.items())
    if (key != "peak") sum += value.get<int64_t>();
  return sum;
}

TEST(TrainSummaryTest, JsonHasEveryDesignKeyAndMemoryAddsUp) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  Trainer trainer(*backend, tiny_spec(DType::kBF16, 3, fresh_dir("ckpt")));
  const TrainSummary summary = trainer.run();
  const Json json = parse_json(dump_json(summary.to_json()));

  ASSERT_EQ(json.size(), std::size(kTopKeys));
  size_t i = 0;
  for (const auto& [key, unused] : json.items()) EXPECT_EQ(key, kTopKeys[i++]);
  EXPECT_EQ(json.at("name").get<std::string>(), "tiny");
  EXPECT_EQ(json.at("status").get<std::string>(), "succeeded");
  EXPECT_EQ(json.at("steps").get<int64_t>(), 3);
  EXPECT_EQ(json.at("world_size").get<int64_t>(), 1);
  EXPECT_EQ(json.at("compute_dtype").get<std::string>(), "bf16");
  EXPECT_TRUE(json.at("final_val_loss").is_number_float());
  EXPECT_EQ(json.at("param_count").get<int64_t>(), trainer.layout().numel());

  const Json& ranks = json.at("ranks");
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].at("rank").get<int64_t>(), 0);
  EXPECT_EQ(ranks[0].at("comm_elements_per_step").get<int64_t>(), 0);
  EXPECT_EQ(ranks[0].at("comm_bytes_per_step").get<int64_t>(), 0);
  const Json& device = ranks[0].at("memory_bytes").at("device");
  const Json& host = ranks[0].at("memory_bytes").at("host");
  ASSERT_EQ(device.size(), std::size(kDeviceKeys));
  for (const char* key : kDeviceKeys) EXPECT_TRUE(device.contains(key)) << key;
  ASSERT_EQ(host.size(), std::size(kHostKeys));
  for (const char* key : kHostKeys) EXPECT_TRUE(host.contains(key)) << key;

  // Each category is its own peak over the run (short-lived buffers
  // included), so together they hold at least the pool's peak.
  const MemoryTracker& tracker = backend->memory();
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    const auto category = static_cast<MemoryCategory>(c);
    if (!memory_category_in_pool(MemoryPool::kDevice, category)) {
      EXPECT_EQ(tracker.peak(MemoryPool::kDevice, category), 0u) << memory_category_name(category);
      continue;
    }
    EXPECT_EQ(device.at(memory_category_name(category)).get<int64_t>(),
              static_cast<int64_t>(tracker.peak(MemoryPool::kDevice, category)))
        << memory_category_name(category);
  }
  // Issue 29: the built-in corpus the run trained on is host data.
  EXPECT_EQ(host.at("data").get<int64_t>(),
            static_cast<int64_t>(tracker.peak(MemoryPool::kHost, MemoryCategory::kData)));
  EXPECT_EQ(host.at("data").get<int64_t>(), corpus_bytes_in_memory("builtin:demo"));
  EXPECT_GE(category_sum(device), static_cast<int64_t>(tracker.peak_total(MemoryPool::kDevice)));
  EXPECT_GE(category_sum(host), static_cast<int64_t>(tracker.peak_total(MemoryPool::kHost)));
  EXPECT_EQ(device.at("peak").get<int64_t>(),
            static_cast<int64_t>(tracker.peak_total(MemoryPool::kDevice)));
  // The GEMMs' converted inputs are freed within each op: only a peak sees them.
  EXPECT_EQ(tracker.current(MemoryPool::kDevice, MemoryCategory::kWorkspace), 0u);
  EXPECT_GT(device.at("workspace").get<int64_t>(), 0);
  // Model state of bf16 mixed precision (DESIGN.md §6, stage 0): 2 + 2 + 12 bytes per parameter.
  const int64_t psi = trainer.layout().numel();
  EXPECT_EQ(device.at("params").get<int64_t>(), 2 * psi);
  EXPECT_EQ(device.at("grads").get<int64_t>(), 2 * psi);
  EXPECT_EQ(device.at("master_params").get<int64_t>(), 4 * psi);
  EXPECT_EQ(device.at("optimizer_state").get<int64_t>(), 8 * psi);
  EXPECT_GT(device.at("activations").get<int64_t>(), 0);
}

TEST(TrainSummaryTest, Fp32KeepsNoSecondWeightCopyAndFp32GradsOptionWidensGrads) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  Trainer fp32(*backend, tiny_spec(DType::kF32, 1, fresh_dir("fp32")));
  const int64_t psi = fp32.layout().numel();
  const MemoryReport fp32_memory = fp32.summary("succeeded").ranks[0].memory;
  EXPECT_EQ(fp32_memory.peak[0][static_cast<int>(MemoryCategory::kParams)], 0u);
  EXPECT_EQ(fp32_memory.peak[0][static_cast<int>(MemoryCategory::kMasterParams)],
            static_cast<size_t>(4 * psi));

  std::unique_ptr<Backend> other = make_backend("cpu");
  TrainerOptions options;
  options.grads_fp32 = true;
  Trainer wide(*other, tiny_spec(DType::kBF16, 1, fresh_dir("wide")), options);
  const MemoryReport wide_memory = wide.summary("succeeded").ranks[0].memory;
  EXPECT_EQ(wide_memory.peak[0][static_cast<int>(MemoryCategory::kGrads)],
            static_cast<size_t>(4 * psi));
  EXPECT_EQ(wide.run().steps, 1);
}

TEST(TrainSummaryTest, UnsetLossesAreNull) {
  TrainSummary summary;
  summary.ranks.push_back(RankSummary{});
  const Json json = summary.to_json();
  EXPECT_TRUE(json.at("final_train_loss").is_null());
  EXPECT_TRUE(json.at("final_val_loss").is_null());
  EXPECT_EQ(TrainSummary::from_json(json), summary);
}

TEST(TrainSummaryTest, FromJsonReadsBackWhatARunWrote) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  Trainer trainer(*backend, tiny_spec(DType::kF16, 2, fresh_dir("read")));
  const TrainSummary summary = trainer.run();
  const TrainSummary read = TrainSummary::from_json(parse_json(dump_json(summary.to_json())));
  EXPECT_EQ(read, summary);
  EXPECT_EQ(dump_json(read.to_json()), dump_json(summary.to_json()));
}

// precision.stats_every: each stats step reports this rank's gradient
// range (every stored gradient element counted once), and the summary
// keeps the last one.
TEST(TrainSummaryTest, StatsStepsReportTheGradientRangeAndTheSummaryKeepsTheLast) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  config::JobSpec spec = tiny_spec(DType::kBF16, 5, fresh_dir("stats"));
  spec.precision.stats_every = 2;
  std::vector<int64_t> measured_at;
  TrainerOptions options;
  options.progress.on_step = [&](const StepProgress& step) {
    if (step.gradient_range) {
      measured_at.push_back(step.gradient_range->step);
      EXPECT_EQ(step.gradient_range->dtype, DType::kBF16);
    }
  };
  Trainer trainer(*backend, spec, options);
  const TrainSummary summary = trainer.run();
  EXPECT_EQ(measured_at, (std::vector<int64_t>{2, 4}));
  ASSERT_TRUE(summary.ranks[0].gradient_range.has_value());
  const GradientRange& range = *summary.ranks[0].gradient_range;
  EXPECT_EQ(range.step, 4);
  EXPECT_EQ(range.total().total(), summary.param_count);
  EXPECT_GT(range.total().amax, 0.0f);
  EXPECT_GT(range.groups[static_cast<size_t>(GradientGroup::kAttention)].total(), 0);
  const Json json = summary.to_json();
  EXPECT_EQ(json["ranks"][0]["gradient_range"]["buckets"].size(),
            static_cast<size_t>(MagnitudeHistogram::kBuckets));
  const TrainSummary read = TrainSummary::from_json(parse_json(dump_json(json)));
  EXPECT_EQ(read.ranks[0].gradient_range->total(), range.total());
  // stats_every 0: none.
  spec.precision.stats_every = 0;
  spec.checkpoint.dir = fresh_dir("off").string();
  Trainer off(*backend, spec);
  EXPECT_FALSE(off.run().ranks[0].gradient_range.has_value());
}

// With compute fp8 a stats step also counts the quantized GEMM inputs of
// every micro-batch by their E4M3 values: one element per input element of
// each of the blocks' four GEMMs, by the group of its weight; they reach
// the summary JSON and come back.
TEST(TrainSummaryTest, Fp8StatsStepsCountTheQuantizedActivations) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  config::JobSpec spec = tiny_spec(DType::kFP8E4M3, 2, fresh_dir("fp8_stats"));
  spec.precision.stats_every = 2;
  spec.train.grad_accum = 2;
  std::optional<GradientRange> measured;
  TrainerOptions options;
  options.progress.on_step = [&](const StepProgress& step) {
    if (step.gradient_range) measured = step.gradient_range;
  };
  Trainer trainer(*backend, spec, options);
  const TrainSummary summary = trainer.run();
  ASSERT_TRUE(measured && measured->fp8_activations);
  const int64_t rows = spec.train.micro_batch * spec.model.seq_len * spec.train.grad_accum;
  const int64_t c = spec.model.dim, layers = spec.model.layers;
  const auto& groups = *measured->fp8_activations;
  // qkv and attention projection take (rows, C); MLP up (rows, C), down (rows, 4C).
  EXPECT_EQ(groups[static_cast<size_t>(GradientGroup::kAttention)].total(), layers * rows * 2 * c);
  EXPECT_EQ(groups[static_cast<size_t>(GradientGroup::kMlp)].total(), layers * rows * 5 * c);
  EXPECT_EQ(groups[static_cast<size_t>(GradientGroup::kEmbeddings)].total(), 0);  // head in bf16
  for (const MagnitudeHistogram& group : groups) EXPECT_LE(group.amax, 448.0f);
  const Json json = summary.to_json();
  EXPECT_EQ(json["ranks"][0]["gradient_range"]["fp8_activations"]["dtype"], "fp8_e4m3");
  const TrainSummary read = TrainSummary::from_json(parse_json(dump_json(json)));
  ASSERT_TRUE(read.ranks[0].gradient_range->fp8_activations.has_value());
  EXPECT_EQ((*read.ranks[0].gradient_range->fp8_activations)[0].total(), (layers * rows * 7 * c));
}

TEST(TrainSummaryTest, FromJsonNamesWhatIsMissingOrMistyped) {
  TrainSummary summary;
  summary.ranks.push_back(RankSummary{});
  Json json = summary.to_json();
  json["ranks"][0]["memory_bytes"]["host"].erase("peak");
  try {
    TrainSummary::from_json(json);
    FAIL() << "a summary without host peak was read";
  } catch (const EngineError& error) {
    EXPECT_STREQ(error.what(), "summary JSON: missing \"ranks[].memory_bytes.host.peak\"");
  }
  json = summary.to_json();
  json["steps"] = "ten";
  EXPECT_THROW(TrainSummary::from_json(json), EngineError);
  json = summary.to_json();
  json["ranks"][0]["memory_bytes"]["device"]["grads"] = -1;
  EXPECT_THROW(TrainSummary::from_json(json), EngineError);
}

TEST(TrainSummaryTest, MergeTakesRankZerosFieldsAndEveryRanksEntrySorted) {
  std::vector<TrainSummary> summaries(3);
  for (int rank : {0, 1, 2}) {
    summaries[rank].name = "job";
    summaries[rank].steps = 10 + rank;
    summaries[rank].ranks.push_back(RankSummary{.rank = rank, .comm_bytes_per_step = 100 * rank});
  }
  std::swap(summaries[1], summaries[2]);  // ranks may report in any order after rank 0
  const TrainSummary merged = merge_rank_summaries(summaries);
  EXPECT_EQ(merged.steps, 10);
  ASSERT_EQ(merged.ranks.size(), 3u);
  for (int rank : {0, 1, 2}) {
    EXPECT_EQ(merged.ranks[rank].rank, rank);
    EXPECT_EQ(merged.ranks[rank].comm_bytes_per_step, 100 * rank);
  }
  EXPECT_THROW(merge_rank_summaries({}), EngineError);
}

}  // namespace
}  // namespace mixtrain::train_test
