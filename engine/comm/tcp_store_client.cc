// Why: see tcp_store.h. One request at a time per connection, each bounded
// by a deadline, so a dead or stuck server fails the caller instead of
// hanging it.
#include "engine/comm/store_protocol.h"
#include "engine/comm/tcp_store.h"
#include "engine/common/error.h"
#include "engine/common/host_port.h"

namespace mixtrain {

TcpStoreClient::TcpStoreClient(std::string host, int port, std::chrono::milliseconds timeout)
    : host_(std::move(host)), port_(port), timeout_(timeout) {
  fd_ = connect_tcp(host_, port_, std::chrono::steady_clock::now() + timeout_);
}

std::string TcpStoreClient::round_trip(const std::string& request,
                                       std::chrono::milliseconds server_wait) {
  MIXTRAIN_CHECK_ARG(
      request.size() <= kMaxStoreFrameBytes,
      "store: a request of " + std::to_string(request.size()) + " bytes is over the 64 MiB limit");
  std::lock_guard<std::mutex> lock(mu_);
  const std::string server = "store " + join_host_port(host_, port_);
  if (!fd_.valid()) fd_ = connect_tcp(host_, port_, std::chrono::steady_clock::now() + timeout_);
  const auto deadline = std::chrono::steady_clock::now() + timeout_ + server_wait;
  std::string reply;
  IoStatus status = write_frame(fd_.get(), request, deadline);
  if (status == IoStatus::kOk)
    status = read_frame(fd_.get(), &reply, kMaxStoreFrameBytes, deadline);
  if (status != IoStatus::kOk || reply.empty()) {
    fd_.reset();  // the stream's position is unknown now; reconnect next time
    throw EngineError(
        ErrorCode::kUnavailable,
        server + (status == IoStatus::kTimeout
                      ? " did not reply within " + format_seconds(timeout_ + server_wait) + " s"
                      : std::string(": connection closed")));
  }
  const auto code = static_cast<StoreStatus>(reply[0]);
  reply.erase(0, 1);
  if (code == StoreStatus::kOk) return reply;
  WireReader in(reply);
  const std::string message(in.bytes());
  throw EngineError(
      code == StoreStatus::kInvalidArgument ? ErrorCode::kInvalidArgument : ErrorCode::kUnavailable,
      message);
}

void TcpStoreClient::set(const std::string& key, std::string_view value) {
  const auto request =
      WireWriter().u8(static_cast<uint8_t>(StoreOp::kSet)).bytes(key).bytes(value).body();
  WireReader(round_trip(request, std::chrono::milliseconds(0))).expect_end();
}

std::string TcpStoreClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  const auto request =
      WireWriter().u8(static_cast<uint8_t>(StoreOp::kGet)).bytes(key).i64(timeout.count()).body();
  const std::string reply = round_trip(request, timeout);
  WireReader in(reply);
  std::string value(in.bytes());
  in.expect_end();
  return value;
}

void TcpStoreClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  WireWriter request;
  request.u8(static_cast<uint8_t>(StoreOp::kWait)).u32(static_cast<uint32_t>(keys.size()));
  for (const std::string& key : keys) request.bytes(key);
  request.i64(timeout.count());
  WireReader(round_trip(request.body(), timeout)).expect_end();
}

int64_t TcpStoreClient::add(const std::string& key, int64_t delta) {
  const auto request =
      WireWriter().u8(static_cast<uint8_t>(StoreOp::kAdd)).bytes(key).i64(delta).body();
  const std::string reply = round_trip(request, std::chrono::milliseconds(0));
  WireReader in(reply);
  const int64_t value = in.i64();
  in.expect_end();
  return value;
}

}  // namespace mixtrain
