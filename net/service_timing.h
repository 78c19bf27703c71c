// Why: the worker agent and the coordinator each time their side of the
// connection, and each side's timing is only right given the other's: the
// coordinator waits for the ranks of a running job after it restarts as
// long as an agent takes to reconnect, and it accepts keepalive pings as
// often as a client sends them. Both sides include this header, and the
// compiler checks the relations between the figures.
#pragma once

#include <chrono>

namespace mixtrain::net {

// The longest a client waits between attempts to reach the coordinator:
// its gRPC channel's reconnect backoff and the agent's retry pacing
// (Backoff's default cap) alike.
inline constexpr std::chrono::milliseconds kReconnectCap{2000};

// After a coordinator restart, how much longer than one worker timeout the
// ranks of a running attempt have to come back (scheduler.cc): an agent's
// channel reconnects, then its call retries, each within kReconnectCap.
inline constexpr std::chrono::milliseconds kRestartReconnectMargin{5000};
static_assert(kRestartReconnectMargin >= 2 * kReconnectCap,
              "a restarted coordinator must wait out an agent's reconnect and its retry");

// Keepalive: every client pings an idle connection this often, and the
// coordinator accepts pings that often without counting them as abuse.
inline constexpr std::chrono::milliseconds kClientKeepalive{10000};
inline constexpr std::chrono::milliseconds kServerMinPingInterval{10000};
static_assert(kServerMinPingInterval <= kClientKeepalive,
              "the coordinator would close connections for pinging as often as clients do");

}  // namespace mixtrain::net
