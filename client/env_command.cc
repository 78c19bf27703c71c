// Why: implementation of `mixtrain env`.
#include "client/env_command.h"

#include <nlohmann/json.hpp>

#include "engine/backend/build_info.h"

namespace mixtrain::cli {

namespace {

// "2 device(s), driver 13.0", "0 device(s): <why>" or "not built in".
std::string cuda_text(const BuildInfo& info) {
  if (!info.cuda_compiled) return "not built in";
  std::string text = std::to_string(info.cuda_devices) + " device(s)";
  if (!info.cuda_driver.empty()) text += ", driver " + info.cuda_driver;
  if (!info.cuda_unavailable.empty()) text += ": " + info.cuda_unavailable;
  return text;
}

}  // namespace

int run_env_command(OutputFormat format, std::ostream& out) {
  const BuildInfo info = build_info();
  std::string backends;
  for (const std::string& b : info.backends) backends += (backends.empty() ? "" : ", ") + b;
  if (format == OutputFormat::kJson) {
    nlohmann::json j = {{"version", info.version},
                        {"compiler", info.compiler},
                        {"cpu_features", info.cpu_features},
                        {"onednn", info.onednn},
                        {"cuda_compiled", info.cuda_compiled},
                        {"cuda_devices", info.cuda_devices},
                        {"cuda_unavailable", info.cuda_unavailable},
                        {"cuda_driver", info.cuda_driver},
                        {"omp_threads", info.omp_threads},
                        {"backends", info.backends}};
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "mixtrain      " << info.version << " (" << info.compiler << ")\n"
      << "cpu features  " << info.cpu_features << "\n"
      << "omp threads   " << info.omp_threads << "\n"
      << "oneDNN        " << (info.onednn.empty() ? "not built in" : info.onednn) << "\n"
      << "cuda          " << cuda_text(info) << "\n"
      << "backends      " << backends << "\n";
  return 0;
}

}  // namespace mixtrain::cli
