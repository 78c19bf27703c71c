// Why: the mmap side of mapped_file.h, so every read-only mapping is made
// and unmapped in one place.
#include "engine/common/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "engine/common/error.h"

namespace mixtrain {
namespace {

[[noreturn]] void throw_errno(ErrorCode code, const std::string& what,
                              const std::filesystem::path& path, int error) {
  throw EngineError(code, what + " " + path.string() + ": " + std::strerror(error));
}

// The file at `path` open read-only; throws kInvalidArgument naming it.
UniqueFd open_read_only(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) throw_errno(ErrorCode::kInvalidArgument, "cannot open", path, errno);
  return fd;
}

}  // namespace

MappedFile::MappedFile(std::filesystem::path path) : MappedFile(path, open_read_only(path)) {}

MappedFile::MappedFile(std::filesystem::path path, UniqueFd fd) : path_(std::move(path)) {
  struct stat status {};
  if (::fstat(fd.get(), &status) != 0)
    throw_errno(ErrorCode::kInternal, "cannot stat", path_, errno);
  size_ = static_cast<size_t>(status.st_size);
  if (size_ > 0) {
    void* mapping = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (mapping == MAP_FAILED) throw_errno(ErrorCode::kInternal, "cannot map", path_, errno);
    data_ = static_cast<const std::byte*>(mapping);
  }
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace mixtrain
