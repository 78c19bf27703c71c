// Why: the HTTP endpoints Prometheus scrapes must answer exactly their
// paths, pick a free port when asked for port 0, and refuse a bad address.
#include "http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace mixtrain::server {
namespace {

// The whole response to "GET `path`" on 127.0.0.1:`port`.
std::string http_get(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  EXPECT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  close(fd);
  return response;
}

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

}  // namespace
}  // namespace mixtrain::server
