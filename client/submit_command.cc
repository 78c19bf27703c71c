// Why: see submit_command.h.
#include "client/submit_command.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "client/job_follower.h"

namespace mixtrain::cli {

int submit_job_file(CoordinatorClient& client, const std::filesystem::path& path,
                    const std::vector<std::string>& overrides, std::string& id, std::ostream& err) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  if (!file || std::filesystem::is_directory(path)) {
    err << "mixtrain: cannot read " << path.string() << ": "
        << (std::filesystem::is_directory(path) ? "it is a directory" : std::strerror(errno))
        << "\n";
    return kExitUsage;
  }
  v1::SubmitJobRequest request;
  request.set_spec_yaml(text.str());
  request.set_source_name(path.filename().string());
  for (const std::string& assignment : overrides) request.add_overrides(assignment);
  v1::SubmitJobResponse response;
  const grpc::Status status = client.call(&v1::JobService::Stub::SubmitJob, request, response);
  if (!status.ok()) return client.report(status, "", err);
  id = response.id();
  return kExitOk;
}

int run_submit_command(CoordinatorClient& client, const SubmitCommandArgs& args,
                       OutputFormat format, bool terminal, std::ostream& out, std::ostream& err) {
  std::string id;
  std::vector<std::string> overrides = args.overrides;
  if (args.priority) overrides.push_back("scheduling.priority=" + std::to_string(*args.priority));
  const int code = submit_job_file(client, args.spec_path, overrides, id, err);
  if (code != kExitOk) return code;
  if (format == OutputFormat::kTable) {
    out << "submitted " << id << "\n" << std::flush;
  } else {
    // {"id": "..."}, spaced as DESIGN.md §5 writes it.
    (args.follow ? err : out) << "{\"id\": " << nlohmann::json(id).dump() << "}\n" << std::flush;
  }
  if (!args.follow) return kExitOk;
  FollowOptions options;
  options.format = format;
  options.terminal = terminal;
  return follow_job(client, id, options, out, err).exit_code;
}

}  // namespace mixtrain::cli
