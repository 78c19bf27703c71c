// Why: see contained_open.h. The kernel does the containment (openat2);
// the component walk is the fallback for kernels without it, and it is
// stricter, not looser: it follows no symlink at all.
#include "engine/common/contained_open.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "engine/common/error.h"

namespace mixtrain {
namespace fs = std::filesystem;
namespace {

constexpr int kReadFlags = O_RDONLY | O_CLOEXEC | O_NOCTTY;
// openat2 answers EAGAIN when a concurrent rename may have raced its ".."
// check; the call is then simply made again.
constexpr int kRaceRetries = 100;

// One resolution's outcome: the file, or the errno it failed with and, when
// the path leaves the root, how.
struct Resolved {
  UniqueFd fd;
  int error = 0;
  std::string escape;  // non-empty: the path escapes the root this way
};

// A failed resolution: errno `error`, and how the path escapes, if it does.
Resolved failed(int error, std::string escape = {}) {
  return Resolved{UniqueFd(), error, std::move(escape)};
}

// openat(2), made again when a signal interrupts it.
int openat_retrying(int dir_fd, const char* name, int flags) {
  int fd;
  do {
    fd = ::openat(dir_fd, name, flags);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

Resolved open_with_openat2(int root_fd, const fs::path& path) {
  open_how how{};
  how.flags = kReadFlags;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  for (int races = 0;;) {
    const long fd = ::syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof(how));
    if (fd >= 0) return Resolved{UniqueFd(static_cast<int>(fd))};
    const int error = errno;
    if (error == EINTR || (error == EAGAIN && ++races < kRaceRetries)) continue;
    if (error == EXDEV)
      return failed(error, "an absolute path, \"..\" or a symbolic link leads out");
    if (error == ELOOP) return failed(error, "a symbolic link loop or a /proc magic link");
    return failed(error);
  }
}

Resolved open_by_component_walk(int root_fd, const fs::path& path) {
  if (path.is_absolute()) return failed(EXDEV, "an absolute path");
  std::vector<std::string> names;
  for (const fs::path& part : path) {
    if (part.empty() || part == ".") continue;
    if (part == "..") return failed(EXDEV, "\"..\" is not followed");
    names.push_back(part.string());
  }
  if (names.empty()) return failed(EISDIR);
  UniqueFd current;
  fs::path walked;
  for (size_t i = 0; i < names.size(); ++i) {
    const bool last = i + 1 == names.size();
    const int at = current.valid() ? current.get() : root_fd;
    walked /= names[i];
    const int fd = openat_retrying(
        at, names[i].c_str(),
        last ? kReadFlags | O_NOFOLLOW : O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      const int error = errno;
      struct stat info {};
      if (::fstatat(at, names[i].c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(info.st_mode)) {
        return failed(error, "the symbolic link " + walked.string() + " is not followed");
      }
      return failed(error);
    }
    current = UniqueFd(fd);
  }
  return Resolved{std::move(current)};
}

[[noreturn]] void throw_cannot_open(const fs::path& path, const std::string& where, int error) {
  throw EngineError(ErrorCode::kInvalidArgument,
                    "cannot open '" + path.string() + "'" + where + ": " + std::strerror(error));
}

}  // namespace

UniqueFd open_input_file(const fs::path& path, const std::optional<fs::path>& data_root,
                         BeneathResolution resolution) {
  if (!data_root) {
    const int fd = openat_retrying(AT_FDCWD, path.c_str(), kReadFlags);
    if (fd < 0) throw_cannot_open(path, "", errno);
    return UniqueFd(fd);
  }
  const std::string where = " beneath the data root " + data_root->string();
  const UniqueFd root(
      openat_retrying(AT_FDCWD, data_root->c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) {
    throw EngineError(
        ErrorCode::kInvalidArgument,
        "cannot open the data root " + data_root->string() + ": " + std::strerror(errno));
  }
  Resolved resolved = resolution == BeneathResolution::kKernel ? open_with_openat2(root.get(), path)
                                                               : failed(ENOSYS);
  if (resolved.error == ENOSYS) resolved = open_by_component_walk(root.get(), path);
  if (resolved.fd.valid()) return std::move(resolved.fd);
  if (!resolved.escape.empty()) {
    throw EngineError(ErrorCode::kInvalidArgument,
                      "'" + path.string() + "' escapes the data root " + data_root->string() +
                          " (" + resolved.escape + ")");
  }
  throw_cannot_open(path, where, resolved.error);
}

}  // namespace mixtrain
