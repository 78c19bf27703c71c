// Why: see worker_secrets.h.
#include "server/worker_secrets.h"

#include <openssl/evp.h>

namespace mixtrain::server {

std::string sha256_hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

absl::StatusOr<std::unique_ptr<WorkerSecrets>> WorkerSecrets::open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::open(path);
  if (!db.ok()) return db.status();
  if (absl::Status created =
          (*db)->exec("CREATE TABLE IF NOT EXISTS worker_secrets("
                      "worker_id TEXT PRIMARY KEY, secret_sha256 TEXT NOT NULL);");
      !created.ok()) {
    return created;
  }
  return std::unique_ptr<WorkerSecrets>(new WorkerSecrets(std::move(*db)));
}

absl::Status WorkerSecrets::save(std::string_view worker_id, std::string_view secret) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<SqliteStatement> insert =
      db_->prepare("INSERT OR REPLACE INTO worker_secrets VALUES(?, ?)");
  if (!insert.ok()) return insert.status();
  return insert->bind(1, worker_id).bind(2, sha256_hex(secret)).run();
}

absl::StatusOr<SecretMatch> WorkerSecrets::check(std::string_view worker_id,
                                                 std::string_view secret) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<SqliteStatement> select =
      db_->prepare("SELECT secret_sha256 FROM worker_secrets WHERE worker_id = ?");
  if (!select.ok()) return select.status();
  select->bind(1, worker_id);
  const absl::StatusOr<bool> found = select->step();
  if (!found.ok()) return found.status();
  if (!*found) return SecretMatch::kUnknownWorker;
  return select->column_text(0) == sha256_hex(secret) ? SecretMatch::kMatches
                                                      : SecretMatch::kDiffers;
}

absl::Status WorkerSecrets::forget(std::string_view worker_id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<SqliteStatement> remove =
      db_->prepare("DELETE FROM worker_secrets WHERE worker_id = ?");
  if (!remove.ok()) return remove.status();
  return remove->bind(1, worker_id).run();
}

}  // namespace mixtrain::server
