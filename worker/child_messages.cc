// Why: see child_messages.h.
#include "worker/child_messages.h"

#include <array>

#include "engine/common/error.h"
#include "proto/step_progress.h"
#include "proto/task_process.pb.h"
#include "worker/frame_pipe.h"

namespace mixtrain::worker {
namespace {

void memory_to_proto(const MemoryReport& memory, task::StepReport& out) {
  for (int p = 0; p < kNumMemoryPools; ++p) {
    task::PoolBytes* pool = out.add_memory();
    for (int c = 0; c < kNumMemoryCategories; ++c) {
      pool->add_current(memory.current[p][c]);
      pool->add_category_peak(memory.peak[p][c]);
    }
    pool->set_peak(memory.peak_total[p]);
  }
}

// False when `in` does not list every pool and category.
bool memory_from_proto(const task::StepReport& in, MemoryReport& out) {
  if (in.memory_size() != kNumMemoryPools) return false;
  for (int p = 0; p < kNumMemoryPools; ++p) {
    const task::PoolBytes& pool = in.memory(p);
    if (pool.current_size() != kNumMemoryCategories ||
        pool.category_peak_size() != kNumMemoryCategories)
      return false;
    for (int c = 0; c < kNumMemoryCategories; ++c) {
      out.current[p][c] = pool.current(c);
      out.peak[p][c] = pool.category_peak(c);
    }
    out.peak_total[p] = pool.peak();
  }
  return true;
}

void comm_to_proto(const CommStats& comm, task::StepReport& out) {
  for (int op = 0; op < kNumCommOps; ++op) {
    task::CommOpTotals* totals = out.add_comm();
    totals->set_calls(comm.ops[op].calls);
    totals->set_bytes(comm.ops[op].bytes_sent);
    totals->set_seconds(comm.ops[op].seconds);
  }
}

bool comm_from_proto(const task::StepReport& in, CommStats& out) {
  if (in.comm_size() != kNumCommOps) return false;
  for (int op = 0; op < kNumCommOps; ++op) {
    out.ops[op].calls = in.comm(op).calls();
    out.ops[op].bytes_sent = in.comm(op).bytes();
    out.ops[op].seconds = in.comm(op).seconds();
  }
  return true;
}

using GroupHistograms = std::array<MagnitudeHistogram, kGradientGroups>;
using GroupCounts = google::protobuf::RepeatedPtrField<task::MagnitudeCounts>;

void groups_to_proto(const GroupHistograms& groups, GroupCounts& out) {
  for (const MagnitudeHistogram& group : groups) {
    task::MagnitudeCounts& counts = *out.Add();
    for (int64_t count : group.buckets) counts.add_buckets(count);
    counts.set_zeros(group.zeros);
    counts.set_subnormals(group.subnormals);
    counts.set_nonfinite(group.nonfinite);
    counts.set_amax(group.amax);
  }
}

// False when `in` does not hold every group and bucket.
bool groups_from_proto(const GroupCounts& in, GroupHistograms& out) {
  if (in.size() != kGradientGroups) return false;
  for (int g = 0; g < kGradientGroups; ++g) {
    const task::MagnitudeCounts& counts = in.Get(g);
    if (counts.buckets_size() != MagnitudeHistogram::kBuckets) return false;
    MagnitudeHistogram& group = out[static_cast<size_t>(g)];
    for (int b = 0; b < MagnitudeHistogram::kBuckets; ++b)
      group.buckets[static_cast<size_t>(b)] = counts.buckets(b);
    group.zeros = counts.zeros();
    group.subnormals = counts.subnormals();
    group.nonfinite = counts.nonfinite();
    group.amax = counts.amax();
  }
  return true;
}

void gradient_range_to_proto(const GradientRange& range, task::StepReport& out) {
  task::GradientRangeReport& report = *out.mutable_gradient_range();
  report.set_step(range.step);
  report.set_dtype(dtype_name(range.dtype));
  groups_to_proto(range.groups, *report.mutable_groups());
  if (range.fp8_activations) {
    groups_to_proto(*range.fp8_activations, *report.mutable_fp8_activations());
  }
}

// False when `in` does not hold every group and bucket (of the gradients,
// and of the fp8 activations when it has any) or names no dtype.
bool gradient_range_from_proto(const task::GradientRangeReport& in, GradientRange& out) {
  try {
    out.dtype = parse_dtype(in.dtype());
  } catch (const EngineError&) {
    return false;
  }
  out.step = in.step();
  if (!groups_from_proto(in.groups(), out.groups)) return false;
  if (in.fp8_activations_size() == 0) return true;
  return groups_from_proto(in.fp8_activations(), out.fp8_activations.emplace());
}

std::optional<StepReport> step_from_proto(const task::StepReport& in) {
  StepReport out;
  out.progress = v1::step_from_report(in);
  StepProgress& p = out.progress;
  out.rank_tokens = in.rank_tokens();
  out.model_flops = in.model_flops();
  out.gemm_fallbacks = in.gemm_fallbacks();
  if (!memory_from_proto(in, out.memory) || !comm_from_proto(in, out.comm)) return std::nullopt;
  if (in.has_gradient_range()) {
    p.gradient_range.emplace();
    if (!gradient_range_from_proto(in.gradient_range(), *p.gradient_range)) return std::nullopt;
  }
  if (in.fp8_size() > 0) {
    if (in.fp8_size() != kFp8TensorKinds) return std::nullopt;
    p.fp8.emplace();
    for (int k = 0; k < kFp8TensorKinds; ++k)
      (*p.fp8)[static_cast<size_t>(k)] = {in.fp8(k).amax(), in.fp8(k).min_scale(),
                                          in.fp8(k).saturated()};
  }
  return out;
}

}  // namespace

std::string encode_step(const StepReport& step) {
  const StepProgress& p = step.progress;
  task::ChildReport report;
  task::StepReport& out = *report.mutable_step();
  v1::step_to_report(p, out);
  out.set_rank_tokens(step.rank_tokens);
  out.set_model_flops(step.model_flops);
  out.set_gemm_fallbacks(step.gemm_fallbacks);
  memory_to_proto(step.memory, out);
  comm_to_proto(step.comm, out);
  if (p.gradient_range) gradient_range_to_proto(*p.gradient_range, out);
  if (p.fp8) {
    for (const Fp8KindStats& kind : *p.fp8) {
      task::Fp8KindReport& report = *out.add_fp8();
      report.set_amax(kind.amax);
      report.set_min_scale(kind.min_scale);
      report.set_saturated(kind.saturated);
    }
  }
  return encode_frame(report);
}

std::string encode_eval(const EvalProgress& eval) {
  task::ChildReport report;
  report.mutable_eval()->set_step(eval.step);
  report.mutable_eval()->set_val_loss(eval.val_loss);
  return encode_frame(report);
}

std::string encode_eval_batch(const EvalBatchProgress& eval_batch) {
  task::ChildReport report;
  task::EvalBatchReport& out = *report.mutable_eval_batch();
  out.set_step(eval_batch.step);
  out.set_done(eval_batch.done);
  out.set_batches(eval_batch.batches);
  return encode_frame(report);
}

std::string encode_summary(const TrainSummary& summary) {
  task::ChildReport report;
  report.set_summary_json(dump_json(summary.to_json()));
  return encode_frame(report);
}

std::optional<ChildMessage> decode_child_message(std::string_view frame) {
  task::ChildReport report;
  if (!report.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) return std::nullopt;
  ChildMessage out;
  switch (report.report_case()) {
    case task::ChildReport::kStep: {
      std::optional<StepReport> step = step_from_proto(report.step());
      if (!step) return std::nullopt;
      out.kind = ChildMessage::Kind::kStep;
      out.step = std::move(*step);
      return out;
    }
    case task::ChildReport::kEval:
      out.kind = ChildMessage::Kind::kEval;
      out.eval = {report.eval().step(), report.eval().val_loss()};
      return out;
    case task::ChildReport::kEvalBatch:
      out.kind = ChildMessage::Kind::kEvalBatch;
      out.eval_batch = {report.eval_batch().step(), report.eval_batch().done(),
                        report.eval_batch().batches()};
      return out;
    case task::ChildReport::kSummaryJson:
      try {
        out.kind = ChildMessage::Kind::kSummary;
        out.summary = TrainSummary::from_json(parse_json(report.summary_json()));
        return out;
      } catch (const EngineError&) {
        return std::nullopt;
      }
    case task::ChildReport::REPORT_NOT_SET:
      break;
  }
  return std::nullopt;
}

}  // namespace mixtrain::worker
