// Why: see checkpoint_fence.h.
#include "engine/checkpoint/checkpoint_fence.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <string_view>
#include <system_error>

#include "engine/checkpoint/checkpoint_store.h"
#include "engine/checkpoint/file_io.h"
#include "engine/common/error.h"

namespace mixtrain {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kEpochPrefix = "epoch-";

std::string superseded(const fs::path& dir, int64_t epoch, int64_t newer,
                       const std::string& action) {
  return "cannot " + action + ": attempt " + std::to_string(epoch) + " was superseded, attempt " +
         std::to_string(newer) + " has claimed " + dir.string();
}

}  // namespace

int64_t checkpoint_epoch(const fs::path& dir) {
  int64_t newest = 0;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(kEpochPrefix)) continue;
    int64_t epoch = 0;
    const char* first = name.data() + kEpochPrefix.size();
    const char* last = name.data() + name.size();
    const auto [end_of_number, parsed] = std::from_chars(first, last, epoch);
    if (parsed == std::errc() && end_of_number == last && first != last) {
      newest = std::max(newest, epoch);
    }
  }
  return newest;
}

void claim_checkpoint_epoch(const fs::path& dir, int64_t epoch) {
  MIXTRAIN_CHECK_ARG(epoch >= 1, "claim_checkpoint_epoch: epoch " + std::to_string(epoch));
  check_checkpoint_epoch(dir, epoch, "claim the checkpoint directory");
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    throw EngineError(ErrorCode::kInternal, "cannot create checkpoint directory " + dir.string() +
                                                ": " + error.message());
  }
  // One file per epoch, never rewritten: claims only ever add a newer one,
  // so ranks of one attempt on several hosts may claim at once.
  const fs::path claim = dir / (std::string(kEpochPrefix) + std::to_string(epoch));
  const int fd = ::open(claim.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw EngineError(ErrorCode::kInternal,
                      "cannot create " + claim.string() + ": " + std::strerror(errno));
  }
  ::close(fd);
  fsync_directory(dir);
  // A newer attempt that claimed in between wins: ours stands down.
  check_checkpoint_epoch(dir, epoch, "claim the checkpoint directory");
  // What ended attempts were building can never be committed now.
  remove_stale_checkpoint_temporaries(dir, epoch);
}

void check_checkpoint_epoch(const fs::path& dir, int64_t epoch, const std::string& action) {
  if (epoch == 0) return;
  const int64_t current = checkpoint_epoch(dir);
  if (current > epoch) {
    throw EngineError(ErrorCode::kFailedPrecondition, superseded(dir, epoch, current, action));
  }
}

}  // namespace mixtrain
