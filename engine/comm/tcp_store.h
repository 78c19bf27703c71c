// Why: ranks in separate processes (and later on separate machines) need
// one store they all reach. `mixtrain train --nproc N` hosts a
// TcpStoreServer in the launcher and each rank connects a TcpStoreClient;
// the tests do the same on loopback. The server is long-lived and talks to
// whatever connects, so no input, however malformed or abruptly cut off,
// may crash it: a bad client loses its own connection and nothing else.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/comm/memory_store.h"
#include "engine/socket/socket_io.h"
#include "engine/comm/store.h"

namespace mixtrain {

// Serves one MemoryStore over TCP: an accept thread and one thread per
// connection (a blocked get holds only its own connection's thread).
class TcpStoreServer {
 public:
  // Listens on host:port (port 0 picks a free one) and serves until
  // destroyed. Throws EngineError(kUnavailable) when it cannot listen.
  explicit TcpStoreServer(const std::string& host = "127.0.0.1", int port = 0);
  // Closes every connection, fails blocked requests, joins all threads.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  const std::string& host() const { return host_; }
  // The port it listens on (the one picked when constructed with 0).
  int port() const { return port_; }

 private:
  struct Connection {
    UniqueFd fd;
    std::thread thread;
    std::atomic<bool> finished{false};
  };

  void accept_loop();
  // Answers requests on `connection` until it closes or misbehaves.
  void serve(Connection& connection);
  // The reply to one request frame; sets *close_after for a malformed one.
  std::string handle(std::string_view request, bool* close_after);

  const std::string host_;
  int port_ = 0;
  MemoryStore store_;
  UniqueFd listen_fd_;
  UniqueFd wake_read_, wake_write_;  // a pipe that stops accept_loop
  std::thread accept_thread_;
  std::mutex mu_;
  std::list<std::unique_ptr<Connection>> connections_;  // GUARDED_BY(mu_)
};

class TcpStoreClient final : public Store {
 public:
  // Connects to a TcpStoreServer at host:port, retrying until `timeout`
  // (the server may come up after its clients). `timeout` also bounds each
  // round trip beyond a get/wait's own timeout. Throws
  // EngineError(kUnavailable) naming host:port when it cannot connect.
  TcpStoreClient(std::string host, int port,
                 std::chrono::milliseconds timeout = std::chrono::seconds(60));

  // Thread-safe: requests from several threads take turns on one
  // connection. A broken connection fails the request in flight with
  // EngineError(kUnavailable); the next request reconnects.
  void set(const std::string& key, std::string_view value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;

 private:
  // Sends `request` and returns the fields of an ok reply; throws
  // EngineError with the server's code and message otherwise. `server_wait`
  // is how long the server may legitimately block on it.
  std::string round_trip(const std::string& request, std::chrono::milliseconds server_wait);

  const std::string host_;
  const int port_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  UniqueFd fd_;  // GUARDED_BY(mu_)
};

}  // namespace mixtrain
