// Why: see job_view.h.
#include "client/job_view.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "client/gradient_range_chart.h"
#include "client/text_table.h"
#include "engine/common/error.h"
#include "engine/common/json.h"

namespace mixtrain::cli {
namespace {

int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A JSON number as the table shows it; "-" for null or a missing key.
std::string number(const nlohmann::ordered_json& object, const char* key, const char* format) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return "-";
  char text[64];
  std::snprintf(text, sizeof(text), format, it->get<double>());
  return text;
}

}  // namespace

std::string state_name(v1::JobState state) {
  const std::string& name = v1::JobState_Name(state);  // "JOB_STATE_QUEUED"
  return name.empty() ? "UNSPECIFIED" : name.substr(std::string_view("JOB_STATE_").size());
}

bool is_final(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

nlohmann::ordered_json job_json(const v1::Job& job, bool details) {
  nlohmann::ordered_json out = {{"id", job.id()},
                                {"name", job.name()},
                                {"state", state_name(job.state())},
                                {"priority", job.priority()},
                                {"attempt", job.attempt()},
                                {"step", job.progress().step()},
                                {"steps", job.progress().steps()},
                                {"workers", job.workers()},
                                {"restarts", job.restarts()},
                                {"configuration", job.configuration()},
                                {"message", job.message()}};
  if (!details) return out;
  const v1::Progress& p = job.progress();
  out["progress"] = {{"train_loss", p.train_loss()},
                     {"val_loss", p.val_loss()},
                     {"loss_scale", p.loss_scale()},
                     {"overflow_steps", p.overflow_steps()},
                     {"tokens_per_second", p.tokens_per_second()},
                     {"learning_rate", p.learning_rate()},
                     {"grad_norm", p.grad_norm()}};
  out["devices"] = job.devices();
  out["created_unix_ms"] = job.created_unix_ms();
  out["updated_unix_ms"] = job.updated_unix_ms();
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  for (const v1::JobEvent& event : job.events()) {
    events.push_back({{"unix_ms", event.unix_ms()},
                      {"state", state_name(event.state())},
                      {"message", event.message()}});
  }
  out["events"] = std::move(events);
  out["summary"] = parse_summary(job.summary_json());
  return out;
}

nlohmann::ordered_json parse_summary(const std::string& summary_json) {
  if (summary_json.empty()) return nullptr;
  try {
    return parse_json(summary_json);
  } catch (const EngineError&) {
    return nullptr;
  }
}

std::string format_age(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  const int64_t s = std::max<int64_t>(0, (now_unix_ms() - unix_ms) / 1000);
  if (s < 120) return std::to_string(s) + "s";
  if (s < 2 * 3600) return std::to_string(s / 60) + "m";
  if (s < 2 * 86400) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

void print_summary_table(const nlohmann::ordered_json& summary, std::ostream& out) {
  if (!summary.is_object()) return;
  out << "summary\n"
      << "  steps              " << number(summary, "steps", "%.0f") << " ("
      << number(summary, "skipped_steps", "%.0f") << " skipped)\n"
      << "  world size         " << number(summary, "world_size", "%.0f") << ", ZeRO stage "
      << number(summary, "zero_stage", "%.0f") << ", "
      << summary.value("compute_dtype", std::string("-")) << " compute\n"
      << "  parameters         " << number(summary, "param_count", "%.0f") << "\n"
      << "  final train loss   " << number(summary, "final_train_loss", "%.4f") << "\n"
      << "  final val loss     " << number(summary, "final_val_loss", "%.4f") << "\n"
      << "  loss scale         " << number(summary, "loss_scale", "%g") << " ("
      << number(summary, "nonfinite_events", "%.0f") << " non-finite events)\n"
      << "  tokens/s           " << number(summary, "tokens_per_second", "%.0f") << "\n";
  const auto ranks = summary.find("ranks");
  if (ranks == summary.end() || !ranks->is_array()) return;
  for (const auto& rank : *ranks) {
    const auto peak = [&](const char* pool) {
      const auto& memory = rank.value("memory_bytes", nlohmann::ordered_json::object());
      const auto& entry = memory.value(pool, nlohmann::ordered_json::object());
      return format_bytes(entry.value("peak", 0.0));
    };
    out << "  rank " << rank.value("rank", 0) << " peak memory  device " << peak("device")
        << ", host " << peak("host") << "\n";
  }
  print_gradient_range_chart(summary, out);
}

}  // namespace mixtrain::cli
