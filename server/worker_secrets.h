// Why: a restarted coordinator that knew no worker secrets accepted any
// secret presented with a known worker id, so a join-token holder could
// take over a worker (and its next task) after a restart (issue 29). The
// SHA-256 of every secret it hands out is kept in the coordinator's
// SQLite file, so a registration reusing an id is verified after a
// restart as before it; the secrets themselves are never stored.
#pragma once

#include <absl/base/thread_annotations.h>
#include <absl/status/statusor.h>
#include <absl/synchronization/mutex.h>

#include <memory>
#include <string>
#include <string_view>

#include "server/sqlite_db.h"

namespace mixtrain::server {

// What the store knows of a presented (worker id, secret).
enum class SecretMatch { kUnknownWorker, kMatches, kDiffers };

// The SHA-256 of `text`, as 64 lowercase hex digits.
std::string sha256_hex(std::string_view text);

// Thread safe. SQLite errors are INTERNAL, or UNAVAILABLE when the file is
// busy or locked (worth retrying).
class WorkerSecrets {
 public:
  // Opens (creating the table if needed) the store in the SQLite file at
  // `path`, beside the jobs; a store reopened on it knows every secret saved.
  static absl::StatusOr<std::unique_ptr<WorkerSecrets>> open(const std::string& path);

  // Remembers `secret` (hashed) as `worker_id`'s, replacing any other.
  absl::Status save(std::string_view worker_id, std::string_view secret);
  // Whether `secret` is the one saved for `worker_id`.
  absl::StatusOr<SecretMatch> check(std::string_view worker_id, std::string_view secret);
  // Forgets `worker_id`'s secret (it left, or was lost too long ago).
  absl::Status forget(std::string_view worker_id);

 private:
  explicit WorkerSecrets(std::unique_ptr<SqliteDb> db) : db_(std::move(db)) {}

  absl::Mutex mu_;
  std::unique_ptr<SqliteDb> db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mixtrain::server
