// Why: the small pieces the agent is built from, each with a contract of
// its own: line splitting of child output, the child's
// report lines and the task launch surviving their round trip, reading
// MemTotal, the Progress totals, and the backend choice.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <fstream>
#include <sstream>
#include <tuple>

#include "engine/common/machine_memory.h"
#include "engine/common/usable_cores.h"
#include "proto/step_progress.h"
#include "proto/task_process.pb.h"
#include "proto/training_device.h"
#include "worker/child_messages.h"
#include "worker/frame_pipe.h"
#include "worker/line_splitter.h"
#include "worker/resources.h"
#include "worker/task_launch.h"
#include "worker/task_progress.h"

namespace mixtrain::worker {
namespace {

TEST(LineSplitterTest, JoinsChunksAndCutsLongLines) {
  std::vector<std::string> lines;
  LineSplitter splitter([&](std::string line) { lines.push_back(std::move(line)); });
  splitter.add("ab");
  splitter.add("c\n\nde");
  EXPECT_EQ(lines, (std::vector<std::string>{"abc", ""}));
  splitter.finish();
  EXPECT_EQ(lines.back(), "de");
  lines.clear();
  splitter.add(std::string(LineSplitter::kMaxLine + 5, 'x'));
  splitter.finish();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].size(), LineSplitter::kMaxLine);
  EXPECT_EQ(lines[1].size(), 5u);
}

// The message bytes of one whole frame.
std::string frame_of(const std::string& frame) {
  std::vector<std::string> frames;
  FrameSplitter splitter([&](std::string_view bytes) { frames.emplace_back(bytes); });
  splitter.add(frame);
  EXPECT_EQ(frames.size(), 1u);
  return frames.empty() ? "" : frames[0];
}

// A step's values, each distinct, through the one pairing of its fields
// with each message's (proto/step_progress.h): the task report keeps them
// all, the job's Progress those it shows, and what the CLI reads back from
// Progress is what went in.
TEST(StepProgressTest, EveryFieldCrossesBothMessagesIntact) {
  StepProgress step;
  step.step = 3;
  step.steps = 9;
  step.loss = 2.5;
  step.loss_scale = 1024;
  step.lr = 6e-4;
  step.grad_norm = 0.75;
  step.tokens_per_second = 12345;
  step.skipped = true;
  step.nonfinite_kind = "inf";
  step.nonfinite_where = "grads";
  step.seconds = 0.125;
  step.tokens = 4096;
  // The values Progress shows, as a tuple to compare at once.
  const auto shown = [](const StepProgress& s) {
    return std::make_tuple(s.step, s.steps, s.loss, s.loss_scale, s.lr, s.grad_norm,
                           s.tokens_per_second);
  };
  task::StepReport report;
  v1::step_to_report(step, report);
  const StepProgress back = v1::step_from_report(report);
  EXPECT_EQ(shown(back), shown(step));
  EXPECT_EQ(std::make_tuple(back.skipped, back.nonfinite_kind, back.nonfinite_where,
                            back.seconds, back.tokens),
            std::make_tuple(true, std::string("inf"), std::string("grads"), 0.125, 4096.0));

  step.skipped = false;  // a skipped step leaves Progress's gradient norm as it was
  v1::Progress progress;
  v1::step_to_progress(step, progress);
  EXPECT_EQ(shown(v1::step_from_progress(progress)), shown(step));
}

TEST(ChildMessagesTest, StepEvalAndSummaryRoundTrip) {
  StepReport step;
  step.progress.step = 3;
  step.progress.steps = 9;
  step.progress.loss = std::numeric_limits<double>::quiet_NaN();
  step.progress.skipped = true;
  step.progress.nonfinite_kind = "nan";
  step.progress.nonfinite_where = "loss";
  step.progress.seconds = 0.5;
  step.model_flops = 7e9;
  step.gemm_fallbacks = 42;
  step.memory.current[1][2] = 123;
  step.memory.peak_total[1] = 456;
  step.memory.peak[1][2] = 789;
  step.comm[CommOp::kAllGather].calls = 3;
  step.comm[CommOp::kAllGather].bytes_sent = 99;
  step.comm[CommOp::kAllGather].seconds = 0.25;
  step.progress.gradient_range.emplace();
  step.progress.gradient_range->step = 3;
  step.progress.gradient_range->dtype = DType::kF16;
  step.progress.gradient_range->groups[2].buckets[7] = 11;
  step.progress.gradient_range->groups[3].subnormals = 5;
  step.progress.gradient_range->groups[1].amax = 0.75f;
  step.progress.gradient_range->fp8_activations.emplace();
  (*step.progress.gradient_range->fp8_activations)[1].buckets[38] = 9;
  step.progress.fp8.emplace();
  (*step.progress.fp8)[2] = Fp8KindStats{1e-3f, 2048.0f, 17};
  const std::optional<ChildMessage> decoded = decode_child_message(frame_of(encode_step(step)));
  ASSERT_TRUE(decoded.has_value());
  ASSERT_EQ(decoded->kind, ChildMessage::Kind::kStep);
  EXPECT_EQ(decoded->step.progress.step, 3);
  EXPECT_TRUE(std::isnan(decoded->step.progress.loss));
  EXPECT_EQ(decoded->step.progress.nonfinite_kind, "nan");
  EXPECT_EQ(decoded->step.progress.nonfinite_where, "loss");
  EXPECT_EQ(decoded->step.model_flops, 7e9);
  EXPECT_EQ(decoded->step.gemm_fallbacks, 42);
  EXPECT_EQ(decoded->step.memory.current[1][2], 123u);
  EXPECT_EQ(decoded->step.memory.peak_total[1], 456u);
  EXPECT_EQ(decoded->step.memory.peak[1][2], 789u);
  EXPECT_EQ(decoded->step.comm[CommOp::kAllGather].calls, 3);
  EXPECT_EQ(decoded->step.comm[CommOp::kAllGather].bytes_sent, 99);
  EXPECT_EQ(decoded->step.comm[CommOp::kAllGather].seconds, 0.25);
  EXPECT_EQ(decoded->step.progress.gradient_range, step.progress.gradient_range);
  ASSERT_TRUE(decoded->step.progress.fp8.has_value());
  EXPECT_EQ((*decoded->step.progress.fp8)[2].saturated, 17);
  EXPECT_EQ((*decoded->step.progress.fp8)[2].min_scale, 2048.0f);
  step.progress.gradient_range.reset();
  step.progress.fp8.reset();
  const std::optional<ChildMessage> plain = decode_child_message(frame_of(encode_step(step)));
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(plain->step.progress.gradient_range.has_value());
  EXPECT_FALSE(plain->step.progress.fp8.has_value());

  const std::optional<ChildMessage> eval = decode_child_message(frame_of(encode_eval({4, 1.5})));
  ASSERT_TRUE(eval.has_value());
  EXPECT_EQ(eval->kind, ChildMessage::Kind::kEval);
  EXPECT_EQ(eval->eval.step, 4);
  EXPECT_EQ(eval->eval.val_loss, 1.5);

  TrainSummary summary;
  summary.name = "n";
  summary.status = "failed";
  summary.ranks.push_back(RankSummary{.rank = 2, .comm_bytes_per_step = 5});
  summary.ranks[0].gradient_range.emplace();
  summary.ranks[0].gradient_range->dtype = DType::kBF16;
  summary.ranks[0].gradient_range->groups[0].buckets[40] = 1000;
  summary.ranks[0].gradient_range->groups[0].zeros = 3;
  summary.final_val_loss = 2.0;
  const std::optional<ChildMessage> decoded_summary =
      decode_child_message(frame_of(encode_summary(summary)));
  ASSERT_TRUE(decoded_summary.has_value());
  ASSERT_EQ(decoded_summary->kind, ChildMessage::Kind::kSummary);
  EXPECT_EQ(decoded_summary->summary, summary);

  summary.final_train_loss = std::numeric_limits<double>::quiet_NaN();  // a diverged run
  const std::optional<ChildMessage> diverged =
      decode_child_message(frame_of(encode_summary(summary)));
  ASSERT_TRUE(diverged.has_value());
  EXPECT_FALSE(diverged->summary.final_train_loss.has_value());  // JSON's null
  EXPECT_EQ(diverged->summary.final_val_loss, 2.0);
}

TEST(ChildMessagesTest, MalformedFramesAreDropped) {
  task::ChildReport empty;
  task::ChildReport step_without_memory;
  step_without_memory.mutable_step()->set_step(1);
  task::ChildReport not_a_summary;
  not_a_summary.set_summary_json(R"({"steps": 3})");
  task::ChildReport not_json;
  not_json.set_summary_json("{");
  for (const std::string& frame :
       {std::string("\xff\xff\xff"), empty.SerializeAsString(),
        step_without_memory.SerializeAsString(), not_a_summary.SerializeAsString(),
        not_json.SerializeAsString()}) {
    EXPECT_FALSE(decode_child_message(frame).has_value());
  }
}

TEST(FrameSplitterTest, JoinsChunksIntoFramesAndBreaksOnAnOversizedOne) {
  std::vector<std::string> frames;
  FrameSplitter splitter([&](std::string_view frame) { frames.emplace_back(frame); });
  task::ChildReport first;
  first.mutable_eval()->set_step(1);
  task::ChildReport second;
  second.set_summary_json(std::string(5000, 'x'));
  const std::string bytes = encode_frame(first) + encode_frame(second) + encode_frame(first);
  for (size_t i = 0; i < bytes.size(); i += 7) splitter.add(std::string_view(bytes).substr(i, 7));
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0], first.SerializeAsString());
  EXPECT_EQ(frames[1], second.SerializeAsString());
  EXPECT_EQ(frames[2], first.SerializeAsString());
  EXPECT_FALSE(splitter.broken());

  splitter.add(encode_frame(first).substr(0, 5));  // the child died writing it
  splitter.finish();
  EXPECT_EQ(frames.size(), 3u);

  // 0xffffffff bytes announced: the stream is broken and stays ignored.
  splitter.add(std::string(4, '\xff') + encode_frame(first));
  EXPECT_TRUE(splitter.broken());
  splitter.add(encode_frame(first));
  EXPECT_EQ(frames.size(), 3u);
}

TEST(TaskLaunchTest, RoundTripsAndRejectsGarbage) {
  TaskLaunch launch;
  launch.task.set_job_id("j");
  launch.task.set_rank(1);
  launch.task.set_world_size(2);
  launch.task.set_spec_json(R"({"name": "x"})");
  launch.task.set_resume(true);
  launch.backend = "cpu";
  launch.connection.address = "coord:50051";
  launch.connection.join_token = "secret";
  launch.connection.channel.tls_ca_file = "/ca.pem";
  launch.data_address = "10.1.2.3";
  launch.data_iface = "eth1";
  launch.threads = 3;
  std::string error;
  const std::optional<TaskLaunch> decoded = decode_task_launch(encode_task_launch(launch), error);
  ASSERT_TRUE(decoded.has_value()) << error;
  EXPECT_EQ(decoded->task.SerializeAsString(), launch.task.SerializeAsString());
  EXPECT_EQ(decoded->connection.join_token, "secret");
  EXPECT_EQ(decoded->connection.channel.tls_ca_file, "/ca.pem");
  EXPECT_EQ(decoded->data_address, "10.1.2.3");
  EXPECT_EQ(decoded->data_iface, "eth1");
  EXPECT_EQ(decoded->threads, 3);
  launch.threads = 0;
  EXPECT_FALSE(decode_task_launch(encode_task_launch(launch), error).has_value());
  EXPECT_NE(error.find("threads"), std::string::npos) << error;
  EXPECT_FALSE(decode_task_launch("{\"task\": 5}", error).has_value());
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(decode_task_launch("", error).has_value());  // no task in it
}

TEST(ResourcesTest, MemTotalAndThisMachine) {
  EXPECT_EQ(parse_meminfo_total("MemTotal:       16318504 kB\nMemFree: 1 kB\n"),
            int64_t{16318504} * 1024);
  EXPECT_EQ(parse_meminfo_total("MemFree: 1 kB\n"), 0);
  const v1::Resources resources = detect_resources("cpu");
  EXPECT_GE(resources.cpu_cores(), 1);
  EXPECT_GT(resources.memory_bytes(), 0);
  EXPECT_EQ(resources.backend(), v1::BACKEND_CPU);
  EXPECT_GT(estimated_peak_flops(resources), 0.0);
}

// Issue 29: a worker in a container registered the host's MemTotal, more
// than its cgroup lets it use; the cgroup's limit now bounds the figure.
TEST(ResourcesTest, CgroupMemoryLimitBoundsTheMachinesMemory) {
  EXPECT_EQ(parse_cgroup_memory_limit("8589934592\n"), int64_t{8} << 30);
  EXPECT_EQ(parse_cgroup_memory_limit("max\n"), 0);
  EXPECT_EQ(parse_cgroup_memory_limit("9223372036854771712\n"), 0);  // v1: no limit
  EXPECT_EQ(parse_cgroup_memory_limit(""), 0);
  EXPECT_EQ(cgroup_memory_limit_files("0::/system.slice/a.scope\n"),
            (std::vector<std::string>{"/sys/fs/cgroup/system.slice/a.scope/memory.max",
                                      "/sys/fs/cgroup/memory.max"}));
  EXPECT_EQ(cgroup_memory_limit_files("5:cpu:/x\n4:memory:/docker/c1\n0::/\n"),
            (std::vector<std::string>{"/sys/fs/cgroup/memory/docker/c1/memory.limit_in_bytes",
                                      "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                      "/sys/fs/cgroup/memory.max"}));
  // This machine: never more than its cgroup allows.
  std::ifstream cgroup("/proc/self/cgroup");
  std::stringstream text;
  text << cgroup.rdbuf();
  for (const std::string& file : cgroup_memory_limit_files(text.str())) {
    std::ifstream in(file);
    if (!in) continue;
    std::stringstream limit;
    limit << in.rdbuf();
    if (const int64_t bytes = parse_cgroup_memory_limit(limit.str()); bytes > 0) {
      EXPECT_LE(machine_memory_bytes(), bytes) << file;
    }
    break;
  }
}

// Without --memory-limit a worker offers its machine less a tenth, and at
// least 512 MiB less, for the system.
TEST(ResourcesTest, DefaultMemoryLimitKeepsAReserve) {
  EXPECT_EQ(default_memory_limit(int64_t{80} << 30), (int64_t{80} << 30) - (int64_t{8} << 30));
  EXPECT_EQ(default_memory_limit(int64_t{2} << 30), (int64_t{2} << 30) - (int64_t{512} << 20));
  EXPECT_EQ(default_memory_limit(int64_t{256} << 20), 0);
  EXPECT_EQ(default_memory_limit(0), 0);
}

TEST(ResourcesTest, CgroupQuotaRoundsUpAndMaxIsNoLimit) {
  EXPECT_EQ(cgroup_v2_quota_cores("max 100000\n"), std::nullopt);
  EXPECT_EQ(cgroup_v2_quota_cores("150000 100000\n"), 2);
  EXPECT_EQ(cgroup_v2_quota_cores("100000 100000"), 1);
  EXPECT_EQ(cgroup_v2_quota_cores("50000 100000"), 1);
  EXPECT_EQ(cgroup_v2_quota_cores(""), std::nullopt);
  EXPECT_EQ(cgroup_v2_quota_cores("garbage"), std::nullopt);
  cpu_set_t mask;
  CPU_ZERO(&mask);
  ASSERT_EQ(sched_getaffinity(0, sizeof(mask), &mask), 0);
  EXPECT_GE(usable_cores(), 1);
  EXPECT_LE(usable_cores(), CPU_COUNT(&mask));
}

// The published dense fp16 peaks: A100 312 TFLOP/s, H100 SXM 989 TFLOP/s.
TEST(ResourcesTest, CudaPeakFromTheDevice) {
  v1::Resources resources;
  resources.set_backend(v1::BACKEND_CUDA);
  v1::CudaDevice* device = resources.add_cuda_devices();
  device->set_compute_capability_major(8);
  device->set_compute_capability_minor(0);
  device->set_multiprocessors(108);
  device->set_clock_khz(1410000);
  EXPECT_NEAR(estimated_peak_flops(resources), 312e12, 1e12);
  device->set_compute_capability_major(9);
  device->set_multiprocessors(132);
  device->set_clock_khz(1830000);
  EXPECT_NEAR(estimated_peak_flops(resources), 989e12, 2e12);
  device->set_compute_capability_major(6);  // Pascal: no tensor cores, no estimate
  EXPECT_EQ(estimated_peak_flops(resources), 0.0);
  resources.clear_cuda_devices();
  EXPECT_EQ(estimated_peak_flops(resources), 0.0);
}

// The rate is the one of the GPU the rank trains on (--backend cuda:1),
// not of the first one listed.
TEST(ResourcesTest, CudaPeakOfTheTrainingDevice) {
  v1::Resources resources;
  resources.set_backend(v1::BACKEND_CUDA);
  for (int i = 0; i < 2; ++i) {
    v1::CudaDevice* device = resources.add_cuda_devices();
    device->set_index(i);
    device->set_compute_capability_major(i == 0 ? 8 : 9);
    device->set_multiprocessors(i == 0 ? 108 : 132);
    device->set_clock_khz(i == 0 ? 1410000 : 1830000);
  }
  resources.set_cuda_device(1);
  EXPECT_NEAR(estimated_peak_flops(resources), 989e12, 2e12);
  EXPECT_EQ(v1::training_device_name(resources), "cuda:1");
  resources.set_cuda_device(2);  // not listed
  EXPECT_EQ(estimated_peak_flops(resources), 0.0);
}

TEST(ResourcesTest, BackendChoice) {
  EXPECT_EQ(*resolve_backend("cpu"), "cpu");
  const std::string chosen = *resolve_backend("auto");
  EXPECT_TRUE(chosen == "cpu" || chosen == "cuda:0") << chosen;
  EXPECT_EQ(resolve_backend("tpu").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(resolve_backend("cuda:x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(resolve_backend("cuda:-1").status().code(), absl::StatusCode::kInvalidArgument);
  // No machine has 4096 GPUs; the message says how many it has.
  const absl::Status too_far = resolve_backend("cuda:4096").status();
  EXPECT_EQ(too_far.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(too_far.message()), ::testing::HasSubstr("--backend cuda:4096"));
  const v1::Resources resources = detect_resources(chosen);
  EXPECT_EQ(v1::training_device_name(resources), chosen);
  if (chosen == "cpu") {
    EXPECT_EQ(resolve_backend("cuda").status().code(), absl::StatusCode::kUnavailable);
#ifdef MIXTRAIN_WITH_CUDA
    // A CUDA build without a usable GPU says why, in the registration too.
    EXPECT_THAT(std::string(resolve_backend("cuda").status().message()),
                ::testing::HasSubstr("no usable CUDA device: "));
    EXPECT_FALSE(resources.cuda_unavailable().empty());
#endif
  }
}

TEST(TaskProgressTest, KeepsTotalsAcrossStepsAndEvals) {
  TaskProgress progress;
  StepProgress step;
  step.step = 1;
  step.steps = 5;
  step.loss = 3.0;
  step.grad_norm = 0.5;
  progress.on_step(step);
  step.step = 2;
  step.skipped = true;
  step.grad_norm = 0.0;
  step.loss = std::numeric_limits<double>::infinity();
  progress.on_step(step);
  progress.on_eval({2, 2.5});
  EXPECT_EQ(progress.progress().step(), 2);
  EXPECT_EQ(progress.progress().train_loss(), 3.0);  // the last finite loss
  EXPECT_EQ(progress.progress().grad_norm(), 0.5);
  EXPECT_EQ(progress.progress().overflow_steps(), 1);
  EXPECT_EQ(progress.progress().val_loss(), 2.5);
}

// Issue 13: a task resumed from its final checkpoint runs no step; its
// progress comes from its summary instead of staying at step 0.
TEST(TaskProgressTest, ASummaryCompletesWhatNoStepReported) {
  TaskProgress progress;
  progress.on_eval({600, 2.25});
  TrainSummary summary;
  summary.steps = 600;
  summary.final_train_loss = 2.5;
  summary.final_val_loss = 2.25;
  summary.loss_scale = 1024.0;
  progress.on_summary(summary);
  EXPECT_EQ(progress.progress().step(), 600);
  EXPECT_EQ(progress.progress().train_loss(), 2.5);
  EXPECT_EQ(progress.progress().val_loss(), 2.25);
  EXPECT_EQ(progress.progress().loss_scale(), 1024.0);

  TaskProgress stepped;  // steps reported: the summary changes nothing
  StepProgress step;
  step.step = 5;
  step.steps = 5;
  step.loss = 3.0;
  stepped.on_step(step);
  TrainSummary same_steps;
  same_steps.steps = 5;
  same_steps.final_train_loss = 9.0;
  stepped.on_summary(same_steps);
  EXPECT_EQ(stepped.progress().train_loss(), 3.0);
}

}  // namespace
}  // namespace mixtrain::worker
