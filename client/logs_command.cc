// Why: see logs_command.h.
#include "logs_command.h"

#include <nlohmann/json.hpp>

namespace mixtrain::cli {

int run_logs_command(CoordinatorClient& client, const LogsCommandArgs& args, OutputFormat format,
                     std::ostream& out, std::ostream& err) {
  grpc::ClientContext context;
  client.prepare_stream(context);
  v1::StreamLogsRequest request;
  request.set_id(args.id);
  request.set_follow(args.follow);
  request.set_tail_lines(args.tail);
  std::unique_ptr<grpc::ClientReader<v1::LogLine>> reader =
      client.jobs().StreamLogs(&context, request);
  v1::LogLine line;
  while (reader->Read(&line)) {
    if (format == OutputFormat::kJson) {
      out << nlohmann::json{{"attempt", line.attempt()},
                            {"rank", line.rank()},
                            {"unix_ms", line.unix_ms()},
                            {"text", line.text()}}
                 .dump()
          << "\n";
    } else {
      out << "[attempt " << line.attempt() << " rank " << line.rank() << "] " << line.text()
          << "\n";
    }
    out.flush();
  }
  const grpc::Status status = reader->Finish();
  return status.ok() ? kExitOk : client.report(status, args.id, err);
}

}  // namespace mixtrain::cli
