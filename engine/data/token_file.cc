// Why: file mapping for token_file.h, so that a corpus of any size costs
// page cache rather than process memory, and every failure is reported
// with the operating system's reason.
#include "engine/data/token_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "engine/common/contained_open.h"
#include "engine/common/error.h"
#include "engine/common/mapped_file.h"

namespace mixtrain {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw EngineError(ErrorCode::kInvalidArgument, "data file '" + path + "': " + what);
}

int32_t little_endian_int32(const std::byte* bytes) {
  const auto byte = [bytes](int i) { return static_cast<uint32_t>(bytes[i]); };
  return static_cast<int32_t>(byte(0) | byte(1) << 8 | byte(2) << 16 | byte(3) << 24);
}

// The regular, non-empty file at `path`, mapped read-only.
std::shared_ptr<const MappedFile> map_regular_file(
    const std::string& path, const std::optional<std::filesystem::path>& data_root) {
  UniqueFd fd = open_input_file(path, data_root);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0)
    fail(path, std::string("cannot stat: ") + std::strerror(errno));
  if (S_ISDIR(info.st_mode)) fail(path, "is a directory, not a file");
  if (info.st_size == 0) fail(path, "file is empty");
  return std::make_shared<const MappedFile>(path, std::move(fd));
}

bool starts_with_llmc_magic(const MappedFile& file) {
  return file.bytes().size() >= sizeof(int32_t) &&
         little_endian_int32(file.bytes().data()) == kLlmcTokenFileMagic;
}

// The tokens after an llm.c header, checked against the file's size.
TokenCorpus token_file_payload(std::shared_ptr<const MappedFile> file, const std::string& path) {
  const std::span<const std::byte> bytes = file->bytes();
  if (bytes.size() < kLlmcHeaderBytes) {
    fail(path, "is " + std::to_string(bytes.size()) + " bytes, shorter than the " +
                   std::to_string(kLlmcHeaderBytes) + "-byte llm.c token file header (truncated)");
  }
  const int32_t magic = little_endian_int32(&bytes[0]);
  const int32_t version = little_endian_int32(&bytes[4]);
  const int32_t count = little_endian_int32(&bytes[8]);
  if (magic != kLlmcTokenFileMagic) {
    fail(path, "bad magic " + std::to_string(magic) + " (an llm.c token file starts with " +
                   std::to_string(kLlmcTokenFileMagic) + "; use format text for a text file)");
  }
  if (version != kLlmcTokenFileVersion) {
    fail(path, "unsupported token file version " + std::to_string(version) +
                   " (only version 1, uint16 tokens, is supported)");
  }
  if (count < 0) fail(path, "header declares a negative token count " + std::to_string(count));
  const uint64_t payload = bytes.size() - kLlmcHeaderBytes;
  const uint64_t expected = static_cast<uint64_t>(count) * sizeof(uint16_t);
  if (payload != expected) {
    fail(path, "header declares " + std::to_string(count) + " tokens (" + std::to_string(expected) +
                   " bytes) but the file holds " + std::to_string(payload) +
                   " bytes after the header" +
                   (payload < expected ? " (truncated)" : " (trailing bytes)"));
  }
  const std::byte* first = bytes.data() + kLlmcHeaderBytes;
  return TokenCorpus(std::move(file), first, static_cast<size_t>(count),
                     TokenCorpus::TokenWidth::kUint16);
}

}  // namespace

TokenCorpus load_token_file(const std::string& path, config::DataFormat format,
                            const std::optional<std::filesystem::path>& data_root) {
  std::shared_ptr<const MappedFile> file = map_regular_file(path, data_root);
  const bool is_token_file = format == config::DataFormat::kTokens ||
                             (format == config::DataFormat::kAuto && starts_with_llmc_magic(*file));
  if (is_token_file) return token_file_payload(std::move(file), path);
  const std::byte* first = file->bytes().data();
  const size_t size = file->bytes().size();
  return TokenCorpus(std::move(file), first, size, TokenCorpus::TokenWidth::kByte);
}

}  // namespace mixtrain
