// Why: WatchJob and StreamLogs push to clients from other threads (issue
// 13). Two ranks logging at once once made a follower skip lines (the
// notice of line N+1 overtook line N's), and a client that never reads
// grew the coordinator without bound (300 such WatchJob streams: 196 MB
// to 850 MB, each update resending the 64 KiB spec). Followers must see
// every stored line once and in order, and a stalled client must cost a
// bounded amount of memory yet, once it reads, lose no log line and get
// the job's latest state.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "cluster_fixture.h"
#include "net/http_get.h"

namespace mixtrain::server {
namespace {

using net::testing_support::http_body;
using testing_support::ClusterTest;
using testing_support::kClientToken;
using testing_support::spec;

int64_t rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      int64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
  }
  return 0;
}

// A client stream the test holds open and reads when it chooses.
template <typename Message>
struct OpenStream {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<Message>> reader;
};

class StreamBoundsTest : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    // A client that never reads: no window growth, so the server's writes
    // stall once the default window is full.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    slow_channel_ = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(server_->port()),
                                              grpc::InsecureChannelCredentials(), args);
    slow_jobs_ = v1::JobService::NewStub(slow_channel_);
  }
  void authorize(grpc::ClientContext& context) {
    context.AddMetadata("authorization", std::string("Bearer ") + kClientToken);
  }
  std::unique_ptr<OpenStream<v1::LogLine>> follow_logs(const std::string& id) {
    auto stream = std::make_unique<OpenStream<v1::LogLine>>();
    authorize(stream->context);
    v1::StreamLogsRequest request;
    request.set_id(id);
    request.set_follow(true);
    stream->reader = slow_jobs_->StreamLogs(&stream->context, request);
    return stream;
  }
  std::unique_ptr<OpenStream<v1::JobUpdate>> watch(const std::string& id) {
    auto stream = std::make_unique<OpenStream<v1::JobUpdate>>();
    authorize(stream->context);
    v1::WatchJobRequest request;
    request.set_id(id);
    stream->reader = slow_jobs_->WatchJob(&stream->context, request);
    return stream;
  }
  // Every line of `stream` until it ends, checked against the store.
  void expect_every_stored_line_once_in_order(OpenStream<v1::LogLine>& stream,
                                              const std::string& id) {
    std::vector<int64_t> seen;
    v1::LogLine line;
    while (stream.reader->Read(&line)) seen.push_back(line.seq());
    EXPECT_TRUE(stream.reader->Finish().ok());
    const absl::StatusOr<std::vector<LogRecord>> records = server_->database().logs(id);
    ASSERT_TRUE(records.ok()) << records.status();
    std::vector<int64_t> stored;
    for (const LogRecord& record : *records) stored.push_back(record.seq);
    EXPECT_EQ(seen.size(), stored.size());
    EXPECT_EQ(seen, stored);
  }

  // mixtrain_log_store_reads_total: pages followers read from the store.
  int64_t log_store_reads() {
    const std::string metrics = http_body(server_->http_port(), "/metrics");
    const std::string name = "\nmixtrain_log_store_reads_total ";
    const size_t at = metrics.find(name);
    return at == std::string::npos ? -1 : std::stoll(metrics.substr(at + name.size()));
  }

  std::shared_ptr<grpc::Channel> slow_channel_;
  std::unique_ptr<v1::JobService::Stub> slow_jobs_;
};

TEST_F(StreamBoundsTest, AFollowerSeesEveryLineOfConcurrentWritersOnceInOrder) {
  const std::string id = submit(spec(1));  // no worker: it stays QUEUED
  auto follower = follow_logs(id);
  std::vector<std::thread> writers;
  for (int rank = 0; rank < 8; ++rank) {
    writers.emplace_back([&, rank] {
      for (int i = 0; i < 250; ++i) {
        ASSERT_TRUE(server_->database().append_log(id, 1, rank, "line " + std::to_string(i)).ok());
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  ASSERT_TRUE(server_->database().transition(id, v1::JOB_STATE_CANCELLED, "done").ok());
  expect_every_stored_line_once_in_order(*follower, id);
}

// 300 followers once made every appended line cost 300 store reads under
// the hub's lock (issue 29): a follower that has every line gets the next
// one from the append itself, without a read.
TEST_F(StreamBoundsTest, CaughtUpFollowersGetNewLinesWithoutReadingTheStore) {
  const std::string id = submit(spec(1));  // no worker: it stays QUEUED
  constexpr int kFollowers = 30;
  constexpr int kLines = 20;
  std::vector<std::unique_ptr<OpenStream<v1::LogLine>>> follows;
  for (int i = 0; i < kFollowers; ++i) follows.push_back(follow_logs(id));
  // Each reads the (empty) stored log once as it starts.
  ASSERT_TRUE(eventually([&] { return log_store_reads() >= kFollowers; }));
  const int64_t reads_before = log_store_reads();
  for (int i = 0; i < kLines; ++i) {
    ASSERT_TRUE(server_->database().append_log(id, 1, 0, "line " + std::to_string(i)).ok());
    for (auto& follow : follows) {
      v1::LogLine line;
      ASSERT_TRUE(follow->reader->Read(&line));
      EXPECT_EQ(line.text(), "line " + std::to_string(i));
    }
    // Let each write's completion come back before the next line: a line
    // told of while one is being written is read from the store after it.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const int64_t reads = log_store_reads() - reads_before;
  std::cout << kFollowers << " followers, " << kLines << " lines: " << reads << " store reads\n";
  // A read per follower and line would be 600; a write completing late
  // (a loaded machine) costs one.
  EXPECT_LT(reads, kFollowers * kLines / 4) << reads;
  ASSERT_TRUE(server_->database().transition(id, v1::JOB_STATE_CANCELLED, "done").ok());
  for (auto& follow : follows) {
    v1::LogLine line;
    EXPECT_FALSE(follow->reader->Read(&line));
    EXPECT_TRUE(follow->reader->Finish().ok());
  }
}

TEST_F(StreamBoundsTest, StalledClientsCostBoundedMemoryAndLoseNothing) {
  std::string big_spec = spec(1);
  big_spec += std::string(60'000 - big_spec.size(), '#');  // a comment: a valid 60 KB spec
  const std::string id = submit(big_spec);
  std::vector<std::unique_ptr<OpenStream<v1::JobUpdate>>> watches;
  std::vector<std::unique_ptr<OpenStream<v1::LogLine>>> follows;
  for (int i = 0; i < 20; ++i) {
    watches.push_back(watch(id));
    follows.push_back(follow_logs(id));
  }
  ASSERT_TRUE(eventually([&] { return server_->database().get_job(id).ok(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the streams are open
  const int64_t before = rss_bytes();
  const std::string text(8000, 'x');
  for (int step = 1; step <= 300; ++step) {
    v1::Progress progress;
    progress.set_step(step);
    ASSERT_TRUE(server_->database().set_progress(id, progress).ok());
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(server_->database().append_log(id, 1, 0, text).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let queues fill, if they do
  const int64_t grown = rss_bytes() - before;
  std::cout << "40 stalled streams: RSS grew by " << grown / (1 << 20) << " MiB\n";
  // Unbounded, 20 watches × 300 updates × 60 KB spec and 20 followers ×
  // 1200 lines × 8 KB queue 550 MB; bounded, the stalled windows and one
  // page per follower hold a few MB.
  EXPECT_LT(grown, 100 << 20) << "RSS grew by " << grown << " bytes";

  ASSERT_TRUE(server_->database().transition(id, v1::JOB_STATE_CANCELLED, "done").ok());
  for (auto& follow : follows) expect_every_stored_line_once_in_order(*follow, id);
  for (auto& stream : watches) {
    v1::JobUpdate update;
    v1::Job last;
    int specs = 0;
    while (stream->reader->Read(&update)) {
      last = update.job();
      specs += update.job().spec_yaml().empty() ? 0 : 1;
    }
    EXPECT_TRUE(stream->reader->Finish().ok());
    EXPECT_EQ(last.state(), v1::JOB_STATE_CANCELLED);
    EXPECT_EQ(last.progress().step(), 300);
    EXPECT_EQ(specs, 1);  // the spec came once, with the first update
  }
}

}  // namespace
}  // namespace mixtrain::server
