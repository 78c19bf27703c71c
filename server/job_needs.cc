// Why: see job_needs.h.
#include "server/job_needs.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "engine/backend/memory_tracker.h"
#include "engine/common/error.h"
#include "engine/common/json.h"

namespace mixtrain::server {

JobNeeds job_needs(const config::JobSpec& spec) {
  const config::PrecisionSpec& precision = spec.precision;
  return JobNeeds{
      .workers = static_cast<int32_t>(spec.resources.workers),
      .backend = spec.resources.backend,
      .max_restarts = static_cast<int32_t>(spec.retries.max_restarts),
      .priority = static_cast<int32_t>(spec.scheduling.priority),
      .preemptible = spec.scheduling.preemptible,
      .configurations = plan::rank_configurations(spec),
      .min_loss_scale = config::effective_loss_scale(precision) == config::LossScaleMode::kDynamic
                            ? std::optional<double>(precision.min_scale)
                            : std::nullopt,
      .min_compute_capability = config::is_fp8_compute(precision) ? kFp8ComputeCapability : 0};
}

const plan::RankConfiguration& smallest_configuration(const JobNeeds& needs) {
  return *std::min_element(needs.configurations.begin(), needs.configurations.end(),
                           [](const plan::RankConfiguration& a, const plan::RankConfiguration& b) {
                             return std::pair(a.memory.device, a.memory.host) <
                                    std::pair(b.memory.device, b.memory.host);
                           });
}

std::string describe_rank_memory(const JobNeeds& needs) {
  const plan::RankConfiguration& smallest = smallest_configuration(needs);
  const plan::RankMemory& memory = smallest.memory;
  char parameters[32];
  std::snprintf(parameters, sizeof(parameters), "%.3g", memory.parameters);
  std::string text = std::string("each needs ") +
                     (needs.configurations.size() > 1 ? "at least " : "") + gib_text(memory.device);
  if (memory.host > 0) text += " plus " + gib_text(memory.host) + " in host memory";
  return text + " for " + parameters + " parameters at " + plan::describe(smallest.choice);
}

std::string configurations_json(const std::vector<plan::RankConfiguration>& configurations) {
  Json out = Json::array();
  for (const plan::RankConfiguration& configuration : configurations) {
    Json entry = plan::choice_json(configuration.choice);
    entry["parameters"] = configuration.memory.parameters;
    entry["device"] = configuration.memory.device;
    entry["host"] = configuration.memory.host;
    out.push_back(std::move(entry));
  }
  return dump_json(out);
}

std::vector<plan::RankConfiguration> configurations_from_json(const std::string& text) {
  std::vector<plan::RankConfiguration> out;
  const Json list = parse_json(text);
  if (!list.is_array()) {
    throw EngineError(ErrorCode::kInvalidArgument, "configurations: expected a JSON array");
  }
  for (const Json& entry : list) {
    const JsonFields fields(entry, "configuration");
    out.push_back({plan::choice_from_json(entry),
                   {fields.number("parameters"), fields.number("device"), fields.number("host")}});
  }
  return out;
}

}  // namespace mixtrain::server
