// Why: see child_messages.h.
#include "worker/child_messages.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace mixtrain::worker {
namespace {

using json = nlohmann::ordered_json;

json memory_json(const MemoryReport& memory) {
  json out = json::object();
  for (int p = 0; p < kNumMemoryPools; ++p) {
    json pool = json::object();
    for (int c = 0; c < kNumMemoryCategories; ++c)
      pool[memory_category_name(static_cast<MemoryCategory>(c))] = memory.current[p][c];
    pool["peak"] = memory.peak_total[p];
    out[memory_pool_name(static_cast<MemoryPool>(p))] = std::move(pool);
  }
  return out;
}

MemoryReport memory_from_json(const json& in) {
  MemoryReport out;
  for (int p = 0; p < kNumMemoryPools; ++p) {
    const json& pool = in.at(memory_pool_name(static_cast<MemoryPool>(p)));
    for (int c = 0; c < kNumMemoryCategories; ++c)
      out.current[p][c] =
          pool.at(memory_category_name(static_cast<MemoryCategory>(c))).get<size_t>();
    out.peak_total[p] = pool.at("peak").get<size_t>();
  }
  return out;
}

json comm_json(const CommStats& comm) {
  json out = json::object();
  for (int op = 0; op < kNumCommOps; ++op) {
    const CommOpStats& stats = comm.ops[op];
    out[comm_op_name(static_cast<CommOp>(op))] = {
        {"calls", stats.calls}, {"bytes", stats.bytes_sent}, {"seconds", stats.seconds}};
  }
  return out;
}

CommStats comm_from_json(const json& in) {
  CommStats out;
  for (int op = 0; op < kNumCommOps; ++op) {
    const json& stats = in.at(comm_op_name(static_cast<CommOp>(op)));
    out.ops[op].calls = stats.at("calls").get<int64_t>();
    out.ops[op].bytes_sent = stats.at("bytes").get<int64_t>();
    out.ops[op].seconds = stats.at("seconds").get<double>();
  }
  return out;
}

// JSON has no NaN or infinity: a non-finite loss travels as null.
json number(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }
double number_from(const json& value) {
  return value.is_null() ? std::numeric_limits<double>::quiet_NaN() : value.get<double>();
}

}  // namespace

std::string encode_step(const StepReport& step) {
  const StepProgress& p = step.progress;
  const json out = {{"type", "step"},
                    {"step", p.step},
                    {"steps", p.steps},
                    {"loss", number(p.loss)},
                    {"loss_scale", p.loss_scale},
                    {"lr", p.lr},
                    {"grad_norm", number(p.grad_norm)},
                    {"tokens_per_second", p.tokens_per_second},
                    {"skipped", p.skipped},
                    {"nonfinite_kind", p.nonfinite_kind},
                    {"nonfinite_where", p.nonfinite_where},
                    {"seconds", p.seconds},
                    {"tokens", p.tokens},
                    {"rank_tokens", step.rank_tokens},
                    {"model_flops", step.model_flops},
                    {"memory", memory_json(step.memory)},
                    {"comm", comm_json(step.comm)}};
  return out.dump();
}

std::string encode_eval(const EvalProgress& eval) {
  return json{{"type", "eval"}, {"step", eval.step}, {"val_loss", number(eval.val_loss)}}.dump();
}

std::string encode_summary(const TrainSummary& summary) {
  return dump_json({{"type", "summary"}, {"summary", summary.to_json()}});
}

std::optional<ChildMessage> decode_child_message(std::string_view line) {
  const json in = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!in.is_object()) return std::nullopt;
  try {
    ChildMessage out;
    const std::string type = in.at("type").get<std::string>();
    if (type == "step") {
      out.kind = ChildMessage::Kind::kStep;
      StepProgress& p = out.step.progress;
      p.step = in.at("step").get<int64_t>();
      p.steps = in.at("steps").get<int64_t>();
      p.loss = number_from(in.at("loss"));
      p.loss_scale = in.at("loss_scale").get<double>();
      p.lr = in.at("lr").get<double>();
      p.grad_norm = number_from(in.at("grad_norm"));
      p.tokens_per_second = in.at("tokens_per_second").get<double>();
      p.skipped = in.at("skipped").get<bool>();
      p.nonfinite_kind = in.at("nonfinite_kind").get<std::string>();
      p.nonfinite_where = in.at("nonfinite_where").get<std::string>();
      p.seconds = in.at("seconds").get<double>();
      p.tokens = in.at("tokens").get<double>();
      out.step.rank_tokens = in.at("rank_tokens").get<double>();
      out.step.model_flops = in.at("model_flops").get<double>();
      out.step.memory = memory_from_json(in.at("memory"));
      out.step.comm = comm_from_json(in.at("comm"));
    } else if (type == "eval") {
      out.kind = ChildMessage::Kind::kEval;
      out.eval.step = in.at("step").get<int64_t>();
      out.eval.val_loss = number_from(in.at("val_loss"));
    } else if (type == "summary") {
      out.kind = ChildMessage::Kind::kSummary;
      const json& summary = in.at("summary");
      if (!summary.is_object()) return std::nullopt;
      out.summary_json = summary.dump();
    } else {
      return std::nullopt;
    }
    return out;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

}  // namespace mixtrain::worker
