// Why: see summary_merge.h.
#include "server/summary_merge.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace mixtrain::server {

std::string merge_rank_summaries(const std::vector<std::string>& summaries) {
  if (summaries.empty()) return "";
  nlohmann::json merged = nlohmann::json::parse(summaries[0], nullptr, /*allow_exceptions=*/false);
  if (!merged.is_object()) return summaries[0];
  nlohmann::json ranks = nlohmann::json::array();
  for (const std::string& text : summaries) {
    const nlohmann::json summary = nlohmann::json::parse(text, nullptr, false);
    if (!summary.is_object() || !summary.contains("ranks") || !summary["ranks"].is_array()) {
      continue;
    }
    for (const nlohmann::json& entry : summary["ranks"]) {
      if (entry.is_object()) ranks.push_back(entry);
    }
  }
  std::stable_sort(ranks.begin(), ranks.end(),
                   [](const nlohmann::json& a, const nlohmann::json& b) {
                     return a.value("rank", 0) < b.value("rank", 0);
                   });
  merged["ranks"] = std::move(ranks);
  return merged.dump();
}

}  // namespace mixtrain::server
