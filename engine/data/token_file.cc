// Why: file reading for token_file.h with POSIX calls, so that every
// failure can be reported with the operating system's reason, and so that
// files of hundreds of MB are read in chunks without a second full copy.
#include "engine/data/token_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>

#include "engine/common/contained_open.h"
#include "engine/common/error.h"

namespace mixtrain {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw EngineError(ErrorCode::kInvalidArgument, "data file '" + path + "': " + what);
}

int32_t little_endian_int32(const unsigned char* bytes) {
  const uint32_t value = uint32_t{bytes[0]} | uint32_t{bytes[1]} << 8 | uint32_t{bytes[2]} << 16 |
                         uint32_t{bytes[3]} << 24;
  return static_cast<int32_t>(value);
}

// An open, regular file; closes itself.
class ReadOnlyFile {
 public:
  ReadOnlyFile(const std::string& path, const std::optional<std::filesystem::path>& data_root)
      : path_(path), fd_(open_input_file(path, data_root)) {
    struct stat info {};
    if (::fstat(fd_.get(), &info) != 0) {
      fail(path, std::string("cannot stat: ") + std::strerror(errno));
    }
    if (S_ISDIR(info.st_mode)) fail(path, "is a directory, not a file");
    size_ = static_cast<uint64_t>(info.st_size);
  }

  uint64_t size() const { return size_; }

  // Whether the first 4 bytes are the llm.c magic; leaves the read
  // position where it was.
  bool starts_with_llmc_magic() const {
    unsigned char bytes[sizeof(int32_t)] = {};
    ssize_t got;
    do {
      got = ::pread(fd_.get(), bytes, sizeof(bytes), 0);
    } while (got < 0 && errno == EINTR);
    if (got < 0) fail(path_, std::string("read failed: ") + std::strerror(errno));
    return got == sizeof(bytes) && little_endian_int32(bytes) == kLlmcTokenFileMagic;
  }

  // Fills exactly `bytes` bytes of `out` from the current position, or
  // throws naming the path (read error or the file shrank while reading).
  void read_exactly(void* out, size_t bytes) {
    auto* cursor = static_cast<char*>(out);
    while (bytes > 0) {
      const ssize_t got = ::read(fd_.get(), cursor, bytes);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) fail(path_, std::string("read failed: ") + std::strerror(errno));
      if (got == 0) fail(path_, "file ended early while reading (modified during load?)");
      cursor += got;
      bytes -= static_cast<size_t>(got);
    }
  }

 private:
  std::string path_;
  UniqueFd fd_;
  uint64_t size_ = 0;
};

TokenBuffer read_text(ReadOnlyFile& file) {
  TokenBuffer tokens(file.size());
  std::vector<unsigned char> chunk(std::min<size_t>(tokens.size(), size_t{1} << 20));
  for (size_t done = 0; done < tokens.size();) {
    const size_t bytes = std::min(chunk.size(), tokens.size() - done);
    file.read_exactly(chunk.data(), bytes);
    std::copy_n(chunk.data(), bytes, tokens.begin() + static_cast<std::ptrdiff_t>(done));
    done += bytes;
  }
  return tokens;
}

TokenBuffer read_tokens(ReadOnlyFile& file, const std::string& path,
                        const std::array<unsigned char, kLlmcHeaderBytes>& header) {
  const int32_t magic = little_endian_int32(&header[0]);
  const int32_t version = little_endian_int32(&header[4]);
  const int32_t count = little_endian_int32(&header[8]);
  if (magic != kLlmcTokenFileMagic) {
    fail(path, "bad magic " + std::to_string(magic) + " (an llm.c token file starts with " +
                   std::to_string(kLlmcTokenFileMagic) + "; use format text for a text file)");
  }
  if (version != kLlmcTokenFileVersion) {
    fail(path, "unsupported token file version " + std::to_string(version) +
                   " (only version 1, uint16 tokens, is supported)");
  }
  if (count < 0) fail(path, "header declares a negative token count " + std::to_string(count));
  const uint64_t payload = file.size() - kLlmcHeaderBytes;
  const uint64_t expected = static_cast<uint64_t>(count) * sizeof(uint16_t);
  if (payload != expected) {
    fail(path, "header declares " + std::to_string(count) + " tokens (" + std::to_string(expected) +
                   " bytes) but the file holds " + std::to_string(payload) +
                   " bytes after the header" +
                   (payload < expected ? " (truncated)" : " (trailing bytes)"));
  }
  TokenBuffer tokens(static_cast<size_t>(count));
  file.read_exactly(tokens.data(), expected);
  if constexpr (std::endian::native == std::endian::big) {
    for (uint16_t& token : tokens) token = static_cast<uint16_t>(token << 8 | token >> 8);
  }
  return tokens;
}

}  // namespace

TokenBuffer load_token_file(const std::string& path, config::DataFormat format,
                            const std::optional<std::filesystem::path>& data_root) {
  ReadOnlyFile file(path, data_root);
  if (file.size() == 0) fail(path, "file is empty");
  const bool is_token_file = format == config::DataFormat::kTokens ||
                             (format == config::DataFormat::kAuto && file.starts_with_llmc_magic());
  if (!is_token_file) return read_text(file);
  if (file.size() < kLlmcHeaderBytes) {
    fail(path, "is " + std::to_string(file.size()) + " bytes, shorter than the " +
                   std::to_string(kLlmcHeaderBytes) + "-byte llm.c token file header (truncated)");
  }
  std::array<unsigned char, kLlmcHeaderBytes> header{};
  file.read_exactly(header.data(), kLlmcHeaderBytes);
  return read_tokens(file, path, header);
}

}  // namespace mixtrain
