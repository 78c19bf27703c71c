// Why: the HTTP endpoints Prometheus scrapes must answer exactly their
// paths, pick a free port when asked for port 0, and refuse a bad address;
// and no client may keep them from answering a scrape: not one trickling
// a byte at a time (slowloris), nor a hundred idle sockets, nor more
// connections than the server holds (issue 13).
#include "net/http_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "net/http_get.h"

namespace mixtrain::net {
namespace {

using testing_support::connect_to;
using testing_support::http_get;

TEST(HttpServer, ServesExactPathsOnAPickedPort) {
  auto server =
      HttpServer::start("127.0.0.1:0", {{"/metrics",
                                         [] {
                                           return HttpResponse{200, "text/plain", "up 1\n"};
                                         }},
                                        {"/sd/workers", [] {
                                           return HttpResponse{200, "application/json", "[]"};
                                         }}});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  const std::string metrics = http_get((*server)->port(), "/metrics");
  EXPECT_NE(metrics.find("HTTP/1.1 200"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("Content-Type: text/plain"), std::string::npos);
  EXPECT_NE(metrics.find("\r\n\r\nup 1\n"), std::string::npos);
  const std::string sd = http_get((*server)->port(), "/sd/workers");
  EXPECT_NE(sd.find("application/json"), std::string::npos);
  EXPECT_NE(sd.find("\r\n\r\n[]"), std::string::npos);
  EXPECT_NE(http_get((*server)->port(), "/metrics/extra").find("HTTP/1.1 404"), std::string::npos);
  EXPECT_NE(http_get((*server)->port(), "/nothing").find("HTTP/1.1 404"), std::string::npos);
}

TEST(HttpServer, RefusesMalformedAndTakenAddresses) {
  EXPECT_EQ(HttpServer::start("localhost", {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpServer::start("127.0.0.1:99999", {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto first = HttpServer::start("127.0.0.1:0", {});
  ASSERT_TRUE(first.ok());
  const auto second = HttpServer::start("127.0.0.1:" + std::to_string((*first)->port()), {});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

TEST(HttpServer, AnswersAScrapeWhileSlowAndIdleClientsHoldConnections) {
  auto server = HttpServer::start(
      "127.0.0.1:0", {{"/metrics", [] { return HttpResponse{200, "text/plain", "up 1\n"}; }}});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  std::vector<int> idle;
  for (int i = 0; i < 100; ++i) idle.push_back(connect_to(port));
  const int slowloris = connect_to(port);
  std::atomic<bool> trickling{true};
  std::thread trickle([&] {
    const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
    for (size_t i = 0; trickling && i < request.size(); ++i) {
      if (send(slowloris, &request[i], 1, MSG_NOSIGNAL) != 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (int scrape = 0; scrape < 3; ++scrape) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_NE(http_get(port, "/metrics").find("\r\n\r\nup 1\n"), std::string::npos);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  }
  trickling = false;
  trickle.join();
  // The slow and idle clients are dropped at their deadline.
  char byte;
  EXPECT_EQ(recv(slowloris, &byte, 1, 0), 0);
  close(slowloris);
  for (int fd : idle) close(fd);
}

TEST(HttpServer, ANewConnectionBeyondTheLimitDisplacesTheOldestUnanswered) {
  auto server = HttpServer::start(
      "127.0.0.1:0", {{"/metrics", [] { return HttpResponse{200, "text/plain", "up 1\n"}; }}});
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<int> idle;
  for (int i = 0; i < 300; ++i) idle.push_back(connect_to((*server)->port()));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_NE(http_get((*server)->port(), "/metrics").find("up 1"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  char byte;
  EXPECT_EQ(recv(idle.front(), &byte, 1, 0), 0);  // the oldest was dropped
  for (int fd : idle) close(fd);
}

}  // namespace
}  // namespace mixtrain::net
