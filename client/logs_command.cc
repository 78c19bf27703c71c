// Why: see logs_command.h.
#include "logs_command.h"

#include <nlohmann/json.hpp>
#include <thread>

#include "reconnect_backoff.h"

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

bool LogCursor::accept(const v1::LogLine& line) {
  if (!past_last_) {
    if (line.unix_ms() < last_.unix_ms()) return false;
    if (line.unix_ms() == last_.unix_ms()) {
      past_last_ = line.attempt() == last_.attempt() && line.rank() == last_.rank() &&
                   line.text() == last_.text();
      return false;
    }
    past_last_ = true;
  }
  last_ = line;
  have_last_ = true;
  return true;
}

int run_logs_command(CoordinatorClient& client, const LogsCommandArgs& args, OutputFormat format,
                     std::ostream& out, std::ostream& err) {
  v1::StreamLogsRequest request;
  request.set_id(args.id);
  request.set_follow(args.follow);
  request.set_tail_lines(args.tail);
  LogCursor cursor;
  ReconnectBackoff backoff(std::chrono::minutes(5));
  while (true) {
    grpc::ClientContext context;
    client.prepare_stream(context);
    std::unique_ptr<grpc::ClientReader<v1::LogLine>> reader =
        client.jobs().StreamLogs(&context, request);
    cursor.restart();
    v1::LogLine line;
    while (reader->Read(&line)) {
      backoff.heard();
      if (cursor.accept(line)) print_line(line, format, out);
    }
    const grpc::Status status = reader->Finish();
    if (status.ok()) return kExitOk;
    const bool retry = args.follow && is_transient(status.error_code());
    if (retry && backoff.connected()) {
      err << "mixtrain: lost the coordinator at " << client.address() << " ("
          << status.error_message() << "), reconnecting\n";
    }
    const std::optional<ReconnectBackoff::Clock::duration> wait =
        retry ? backoff.next_wait() : std::nullopt;
    if (!wait) return client.report(status, args.id, err);
    std::this_thread::sleep_for(*wait);
    if (!cursor.empty()) request.set_tail_lines(0);  // the cursor skips what was printed
  }
}

}  // namespace mixtrain::cli
