// Why: every rank meets its peers through a Store, and the launcher's
// TcpStoreServer talks to whatever connects to it. These tests pin the
// store semantics (blocking get, wait, add, timeouts naming the key) for
// the in-memory and the TCP store alike, the wire format, and that the
// server outlives clients that send garbage, oversized frames, or vanish
// halfway through a message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "engine/comm/key_value_table.h"
#include "engine/comm/memory_store.h"
#include "engine/socket/socket_io.h"
#include "engine/comm/store_protocol.h"
#include "engine/comm/tcp_store.h"
#include "engine/common/error.h"
#include "test_support/engine_error.h"

namespace mixtrain {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

// Runs f, which must throw EngineError(kUnavailable) mentioning `fragment`.
template <class F>
void expect_unavailable(F&& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << fragment;
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(fragment));
  }
}

// The same checks against both kinds of store.
class StoreTest : public ::testing::TestWithParam<bool> {
 protected:
  StoreTest() {
    if (GetParam()) {
      server_ = std::make_unique<TcpStoreServer>();
      store_ = std::make_unique<TcpStoreClient>("127.0.0.1", server_->port());
      other_ = std::make_unique<TcpStoreClient>("127.0.0.1", server_->port());
    } else {
      auto shared = std::make_shared<MemoryStore>();
      memory_ = shared;
      store_ = std::make_unique<SharedStore>(shared);
      other_ = std::make_unique<SharedStore>(shared);
    }
  }

  // A second handle on one MemoryStore, as a second client is on a server.
  class SharedStore final : public Store {
   public:
    explicit SharedStore(std::shared_ptr<MemoryStore> store) : store_(std::move(store)) {}
    void set(const std::string& key, std::string_view value) override { store_->set(key, value); }
    std::string get(const std::string& key, milliseconds timeout) override {
      return store_->get(key, timeout);
    }
    void wait(const std::vector<std::string>& keys, milliseconds timeout) override {
      store_->wait(keys, timeout);
    }
    int64_t add(const std::string& key, int64_t delta) override { return store_->add(key, delta); }

   private:
    std::shared_ptr<MemoryStore> store_;
  };

  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<MemoryStore> memory_;
  std::unique_ptr<Store> store_, other_;
};

TEST_P(StoreTest, SetThenGetReturnsTheBytes) {
  const std::string binary("a\0b\xff", 4);
  store_->set("k", binary);
  EXPECT_EQ(other_->get("k", milliseconds(100)), binary);
  store_->set("k", "replaced");
  EXPECT_EQ(other_->get("k", milliseconds(100)), "replaced");
  store_->set("empty", "");
  EXPECT_EQ(other_->get("empty", milliseconds(100)), "");
}

TEST_P(StoreTest, GetBlocksUntilAnotherClientSets) {
  auto value =
      std::async(std::launch::async, [&] { return store_->get("late", milliseconds(5000)); });
  std::this_thread::sleep_for(milliseconds(50));
  other_->set("late", "here");
  EXPECT_EQ(value.get(), "here");
}

TEST_P(StoreTest, GetAndWaitTimeOutNamingTheKey) {
  expect_unavailable([&] { store_->get("nobody/sets/this", milliseconds(50)); },
                     "key 'nobody/sets/this' was not set within 0.05 s");
  store_->set("present", "1");
  expect_unavailable(
      [&] {
        store_->wait({"present", "absent"}, milliseconds(50));
      },
      "key 'absent'");
}

TEST_P(StoreTest, WaitReturnsOnceEveryKeyIsSet) {
  auto waiting = std::async(std::launch::async, [&] {
    store_->wait({"a", "b"}, milliseconds(5000));
  });
  other_->set("a", "1");
  other_->set("b", "2");
  waiting.get();
}

TEST_P(StoreTest, AddCountsFromZeroAndRejectsNonIntegers) {
  EXPECT_EQ(store_->add("counter", 1), 1);
  EXPECT_EQ(other_->add("counter", 5), 6);
  EXPECT_EQ(store_->add("counter", -2), 4);
  EXPECT_EQ(other_->get("counter", milliseconds(100)), "4");
  store_->set("text", "not a number");
  EXPECT_TRUE(test_support::throws_invalid_argument([&] { store_->add("text", 1); }, {"text"}));
  EXPECT_EQ(store_->add("counter", 0), 4) << "the connection survives the error";
}

TEST_P(StoreTest, LargeValuesRoundTrip) {
  std::string big(3 << 20, 'x');
  big[12345] = 'y';
  store_->set("big", big);
  EXPECT_EQ(other_->get("big", milliseconds(5000)), big);
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Tcp" : "Memory"; });

TEST(MemoryStore, CloseWakesBlockedCallsWithAnError) {
  MemoryStore store;
  auto blocked = std::async(std::launch::async, [&] { store.get("never", milliseconds(60000)); });
  std::this_thread::sleep_for(milliseconds(20));
  store.close();
  expect_unavailable([&] { blocked.get(); }, "store closed");
  expect_unavailable([&] { store.set("k", "v"); }, "store closed");
}

// What both stores mean by a key (the TCP/in-memory one and the
// coordinator's rendezvous store share this table).
TEST(KeyValueTable, SetFindFirstMissingAndAdd) {
  KeyValueTable table;
  EXPECT_EQ(table.find("a"), nullptr);
  table.set("a", std::string("x\0y", 3));
  ASSERT_NE(table.find("a"), nullptr);
  EXPECT_EQ(*table.find("a"), std::string("x\0y", 3));
  const std::vector<std::string> keys = {"a", "b", "c"};
  EXPECT_EQ(*table.first_missing(keys), "b");
  table.set("b", "");  // an empty value is set
  EXPECT_EQ(*table.first_missing(keys), "c");
  EXPECT_EQ(table.first_missing({"a", "b"}), nullptr);
  EXPECT_EQ(table.first_missing({}), nullptr);
  EXPECT_EQ(table.add("n", 5), 5);
  EXPECT_EQ(table.add("n", -7), -2);
  EXPECT_EQ(*table.find("n"), "-2");
  EXPECT_EQ(table.add("b", 1), 1);  // empty counts as 0
  EXPECT_EQ(table.add("a", 1), std::nullopt);
  EXPECT_EQ(*table.find("a"), std::string("x\0y", 3));  // unchanged
  table.set("s", " 4");
  EXPECT_EQ(table.add("s", 1), std::nullopt);  // decimal text only
}

TEST(WireFormat, RoundTripsAndRejectsTruncatedFrames) {
  const std::string body = WireWriter().u8(7).u32(70000).i64(-3).bytes("key").body();
  WireReader in(body);
  EXPECT_EQ(in.u8(), 7);
  EXPECT_EQ(in.u32(), 70000u);
  EXPECT_EQ(in.i64(), -3);
  EXPECT_EQ(in.bytes(), "key");
  in.expect_end();
  WireReader truncated(std::string_view(body).substr(0, body.size() - 1));
  truncated.u8();
  truncated.u32();
  truncated.i64();
  EXPECT_TRUE(test_support::throws_invalid_argument([&] { truncated.bytes(); }, {"malformed"}));
  WireReader extra(body);
  extra.u8();
  EXPECT_TRUE(test_support::throws_invalid_argument([&] { extra.expect_end(); }, {"trailing"}));
}

// A raw connection to the server, for sending what no client would.
UniqueFd raw_connection(const TcpStoreServer& server) {
  return connect_tcp("127.0.0.1", server.port(),
                     std::chrono::steady_clock::now() + milliseconds(5000));
}

TEST(TcpStoreServer, SurvivesMalformedOversizedAndTruncatedRequests) {
  TcpStoreServer server;
  TcpStoreClient good("127.0.0.1", server.port());
  good.set("before", "1");
  const auto soon = [] { return std::chrono::steady_clock::now() + milliseconds(5000); };

  {  // An unknown op: an error reply, then the server hangs up.
    UniqueFd fd = raw_connection(server);
    ASSERT_EQ(write_frame(fd.get(), WireWriter().u8(99).body(), soon()), IoStatus::kOk);
    std::string reply;
    ASSERT_EQ(read_frame(fd.get(), &reply, 1 << 20, soon()), IoStatus::kOk);
    EXPECT_EQ(reply[0], static_cast<char>(StoreStatus::kInvalidArgument));
    EXPECT_THAT(reply, HasSubstr("unknown op 99"));
    EXPECT_EQ(read_frame(fd.get(), &reply, 1 << 20, soon()), IoStatus::kClosed);
  }
  {  // A set whose key length runs past the frame.
    UniqueFd fd = raw_connection(server);
    const std::string lying = WireWriter().u8(1).u32(1000).body() + "short";
    ASSERT_EQ(write_frame(fd.get(), lying, soon()), IoStatus::kOk);
    std::string reply;
    ASSERT_EQ(read_frame(fd.get(), &reply, 1 << 20, soon()), IoStatus::kOk);
    EXPECT_THAT(reply, HasSubstr("malformed"));
  }
  {  // A frame announcing 4 GiB: refused before anything is allocated.
    UniqueFd fd = raw_connection(server);
    const char header[4] = {'\xff', '\xff', '\xff', '\xff'};
    ASSERT_EQ(send(fd.get(), header, 4, MSG_NOSIGNAL), 4);
    std::string reply;
    ASSERT_EQ(read_frame(fd.get(), &reply, 1 << 20, soon()), IoStatus::kOk);
    EXPECT_THAT(reply, HasSubstr("frame too large"));
  }
  {  // Half a frame, then the client vanishes.
    UniqueFd fd = raw_connection(server);
    const char partial[6] = {100, 0, 0, 0, 1, 3};
    ASSERT_EQ(send(fd.get(), partial, sizeof(partial), MSG_NOSIGNAL), 6);
  }
  {  // A blocking get whose client disconnects before the reply.
    UniqueFd fd = raw_connection(server);
    const std::string get = WireWriter().u8(2).bytes("never").i64(200).body();
    ASSERT_EQ(write_frame(fd.get(), get, soon()), IoStatus::kOk);
  }
  // The server still answers everyone else.
  EXPECT_EQ(good.get("before", milliseconds(1000)), "1");
  TcpStoreClient fresh("127.0.0.1", server.port());
  fresh.set("after", "2");
  EXPECT_EQ(good.get("after", milliseconds(1000)), "2");
}

TEST(TcpStoreClient, ConnectsToAServerThatStartsLater) {
  int port = 0;
  { port = TcpStoreServer().port(); }  // a port that was free a moment ago
  auto client = std::async(std::launch::async, [&] {
    return std::make_unique<TcpStoreClient>("127.0.0.1", port, milliseconds(10000));
  });
  std::this_thread::sleep_for(milliseconds(200));
  TcpStoreServer server("127.0.0.1", port);
  auto connected = client.get();
  connected->set("k", "v");
  EXPECT_EQ(connected->get("k", milliseconds(1000)), "v");
}

TEST(TcpStoreClient, FailsWhenNoServerComesOrItGoesAway) {
  int port = 0;
  { port = TcpStoreServer().port(); }
  expect_unavailable([&] { TcpStoreClient("127.0.0.1", port, milliseconds(200)); },
                     "cannot connect to 127.0.0.1:" + std::to_string(port));

  auto server = std::make_unique<TcpStoreServer>();
  TcpStoreClient client("127.0.0.1", server->port(), milliseconds(500));
  auto blocked = std::async(std::launch::async, [&] { client.get("never", milliseconds(60000)); });
  std::this_thread::sleep_for(milliseconds(50));
  server.reset();  // a blocked get fails at once, not after its minute
  try {
    blocked.get();
    ADD_FAILURE() << "get returned after the server went away";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable) << e.what();
  }
}

}  // namespace
}  // namespace mixtrain
