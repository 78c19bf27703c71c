// Why: the HTTP endpoints Prometheus scrapes must answer exactly their
// paths, pick a free port when asked for port 0, and refuse a bad address.
#include "http_server.h"

#include <gtest/gtest.h>

#include <string>

#include "http_get.h"

namespace mixtrain::server {
namespace {

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

}  // namespace
}  // namespace mixtrain::server
