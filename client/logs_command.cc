// Why: see logs_command.h.
#include "client/logs_command.h"

#include <nlohmann/json.hpp>
#include <thread>


namespace mixtrain::cli {
namespace {

void print_line(const v1::LogLine& line, OutputFormat format, std::ostream& out) {
  if (format == OutputFormat::kJson) {
    out << nlohmann::json{{"attempt", line.attempt()},
                          {"rank", line.rank()},
                          {"unix_ms", line.unix_ms()},
                          {"text", line.text()}}
               .dump()
        << "\n";
  } else {
    out << "[attempt " << line.attempt() << " rank " << line.rank() << "] " << line.text() << "\n";
  }
  out.flush();
}

}  // namespace

int run_logs_command(CoordinatorClient& client, const LogsCommandArgs& args, OutputFormat format,
                     std::ostream& out, std::ostream& err) {
  v1::StreamLogsRequest request;
  request.set_id(args.id);
  request.set_follow(args.follow);
  request.set_tail_lines(args.tail);
  net::Backoff backoff = reconnect_backoff(std::chrono::minutes(5));
  while (true) {
    grpc::ClientContext context;
    client.prepare_stream(context);
    std::unique_ptr<grpc::ClientReader<v1::LogLine>> reader =
        client.jobs().StreamLogs(&context, request);
    v1::LogLine line;
    while (reader->Read(&line)) {
      backoff.reset();
      print_line(line, format, out);
      request.set_after_seq(line.seq());
    }
    const grpc::Status status = reader->Finish();
    if (status.ok()) return kExitOk;
    const bool retry = args.follow && is_transient(status.error_code());
    if (retry && backoff.connected()) {
      err << "mixtrain: lost the coordinator at " << client.address() << " ("
          << status.error_message() << "), reconnecting\n";
    }
    const std::optional<net::Backoff::Duration> wait = retry ? backoff.next() : std::nullopt;
    if (!wait) return client.report(status, args.id, err);
    std::this_thread::sleep_for(*wait);
  }
}

}  // namespace mixtrain::cli
