// Why: whether a worker can be reached from other hosts rests on these
// helpers: the address of the route to the coordinator, an interface's
// address, loopback names (Debian's 127.0.1.1 hostname entry), and the
// caller's address as gRPC spells it.
#include "net/net_address.h"

#include <gtest/gtest.h>

namespace mixtrain::net {
namespace {

TEST(NetAddressTest, SplitsHostAndPortWithOrWithoutBrackets) {
  EXPECT_EQ(*split_host_port("coord:50051", "x"), std::make_pair(std::string("coord"), 50051));
  EXPECT_EQ(*split_host_port("[::1]:9400", "x"), std::make_pair(std::string("::1"), 9400));
  EXPECT_FALSE(split_host_port("coord", "the address").ok());
  EXPECT_NE(split_host_port("coord:x", "the address").status().message().find("the address"),
            std::string::npos);
}

TEST(NetAddressTest, ReadsTheCallersHostFromAGrpcPeer) {
  EXPECT_EQ(grpc_peer_host("ipv4:10.0.0.2:5123"), "10.0.0.2");
  EXPECT_EQ(grpc_peer_host("ipv6:[::1]:5123"), "::1");
  EXPECT_EQ(grpc_peer_host("ipv6:%5B::1%5D:5123"), "::1");
  EXPECT_EQ(grpc_peer_host("unix:/tmp/socket"), "");
}

TEST(NetAddressTest, KnowsLoopbackNamesAndAddresses) {
  EXPECT_EQ(loopback_resolution("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(loopback_resolution("127.0.1.1"), "127.0.1.1");
  EXPECT_EQ(loopback_resolution("::1"), "::1");
  EXPECT_NE(loopback_resolution("localhost"), "");
  EXPECT_EQ(loopback_resolution("10.0.0.2"), "");
  EXPECT_EQ(loopback_resolution("no-such-host.invalid"), "");
}

TEST(NetAddressTest, RefusesLoopbackOnlyWhenTheWorkerCallsFromAnotherHost) {
  EXPECT_TRUE(check_reachable_from_other_hosts("the data address", "127.0.1.1", "127.0.0.1",
                                               kDataAddressFix)
                  .ok());  // every process on one host
  EXPECT_TRUE(
      check_reachable_from_other_hosts("the data address", "10.0.0.2", "10.0.0.2", kDataAddressFix)
          .ok());
  const absl::Status refused = check_reachable_from_other_hosts("the data address", "127.0.1.1",
                                                                "10.0.0.2", kDataAddressFix);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            "the data address \"127.0.1.1\" resolves to the loopback address 127.0.1.1, which no "
            "other host can reach (the worker calls from 10.0.0.2): start the worker with "
            "--data-address ADDR or --data-iface NAME");
}

TEST(NetAddressTest, FindsTheRouteAndTheInterfaceOfAnAddress) {
  EXPECT_EQ(*route_source_address("127.0.0.1:50051"), "127.0.0.1");
  EXPECT_EQ(*interface_address("lo"), "127.0.0.1");
  EXPECT_EQ(interface_holding("127.0.0.1"), "lo");
  EXPECT_EQ(interface_holding("192.0.2.77"), "");  // TEST-NET-1: no interface here
  EXPECT_EQ(interface_address("no-such-if0").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(route_source_address("no-such-host.invalid:1").ok());
}

}  // namespace
}  // namespace mixtrain::net
