// Why: the rank side of rank_launcher.h. A rank program (a gtest binary
// the launcher starts once per rank) learns its rank, the world size, the
// collective timeout and the launcher's store from the environment, and
// every scenario in it shares one Gloo communicator over them.
#pragma once

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "engine/comm/gloo/gloo_communicator.h"
#include "engine/comm/tcp_store.h"
#include "comm_test_util.h"

namespace mixtrain::comm_test {

// The integer in environment variable `name`; ends the process (exit 2)
// when it is not set, since then no launcher started this rank.
inline int env_int(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) {
    std::cerr << name << " is not set: rank programs run under rank_launcher.h\n";
    std::exit(2);
  }
  return std::atoi(value);
}

inline int rank() { return env_int("MIXTRAIN_TEST_RANK"); }
inline int world() { return env_int("MIXTRAIN_TEST_WORLD"); }
inline std::chrono::milliseconds timeout() {
  return std::chrono::milliseconds(env_int("MIXTRAIN_TEST_TIMEOUT_MS"));
}

inline TcpStoreClient& store() {
  static TcpStoreClient client("127.0.0.1", env_int("MIXTRAIN_TEST_STORE_PORT"),
                               std::chrono::seconds(30));
  return client;
}

inline Communicator& comm() {
  static GlooCommunicator communicator(store(), rank(), world(), options_with(timeout()));
  return communicator;
}

}  // namespace mixtrain::comm_test
