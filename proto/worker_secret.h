// Why: a worker proves that a WorkerService call is its own (and not
// another join-token holder's) with the secret its registration returned,
// sent as gRPC metadata under this key; the agent, its ranks and the
// coordinator must spell it alike.
#pragma once

namespace mixtrain::v1 {

inline constexpr char kWorkerSecretHeader[] = "x-mixtrain-worker-secret";

}  // namespace mixtrain::v1
