// Why: the POSIX side of checkpoint I/O (open/write/fsync), kept in
// one file so the format code above it never sees a file descriptor.
#include "engine/checkpoint/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "engine/checkpoint/crc32c.h"
#include "engine/common/error.h"

namespace mixtrain {
namespace {

[[noreturn]] void throw_system_error(ErrorCode code, const std::string& what,
                                     const std::filesystem::path& path, int error) {
  throw EngineError(code, what + " " + path.string() + ": " + std::strerror(error));
}

}  // namespace

FileWriter::FileWriter(std::filesystem::path path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_system_error(ErrorCode::kInternal, "cannot create", path_, errno);
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void FileWriter::write(std::span<const std::byte> bytes) {
  if (fd_ < 0) {
    throw EngineError(ErrorCode::kInternal, "write to closed file " + path_.string());
  }
  crc32c_ = crc32c_extend(crc32c_, bytes);
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd_, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      throw_system_error(ErrorCode::kInternal, "cannot write", path_, errno);
    }
    bytes = bytes.subspan(static_cast<size_t>(written));
    bytes_written_ += static_cast<uint64_t>(written);
  }
}

void FileWriter::sync_and_close() {
  if (::fsync(fd_) != 0) throw_system_error(ErrorCode::kInternal, "cannot fsync", path_, errno);
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) throw_system_error(ErrorCode::kInternal, "cannot close", path_, errno);
}

void fsync_directory(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_system_error(ErrorCode::kInternal, "cannot open directory", path, errno);
  if (::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    throw_system_error(ErrorCode::kInternal, "cannot fsync directory", path, error);
  }
  ::close(fd);
}

}  // namespace mixtrain
