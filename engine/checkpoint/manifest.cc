// Why: the manifest's JSON form and its validation, apart from the
// filesystem logic that decides when it is written.
#include "engine/checkpoint/manifest.h"

#include <charconv>
#include <cstdio>
#include <set>

#include "engine/common/error.h"

namespace mixtrain {
namespace {

constexpr std::string_view kFormat = "mixtrain-checkpoint";
constexpr int64_t kVersion = 1;
constexpr std::string_view kDataFileSuffix = ".safetensors";

constexpr const char* kContext = "checkpoint manifest";

[[noreturn]] void refuse(const std::string& problem) {
  throw EngineError(ErrorCode::kInvalidArgument, std::string(kContext) + ": " + problem);
}

std::string crc_hex(uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", crc);
  return text;
}

}  // namespace

bool is_valid_data_file_name(std::string_view name) {
  if (name.size() <= kDataFileSuffix.size() || name.front() == '.' ||
      !name.ends_with(kDataFileSuffix)) {
    return false;
  }
  for (char c : name) {
    const bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!allowed) return false;
  }
  return true;
}

std::string manifest_to_json(const CheckpointManifest& manifest) {
  Json files = Json::array();
  for (const ManifestFile& file : manifest.files) {
    files.push_back({{"name", file.name}, {"bytes", file.bytes}, {"crc32c", crc_hex(file.crc32c)}});
  }
  const Json root = {{"format", kFormat},         {"version", kVersion},
                     {"step", manifest.step},     {"checksum", "crc32c"},
                     {"files", std::move(files)}, {"state", manifest.state}};
  return dump_json(root);
}

CheckpointManifest parse_manifest(std::string_view text) {
  const Json document = parse_json(text);
  const JsonFields root(document, kContext);
  if (root.string("format") != kFormat) {
    refuse("\"format\" is not \"" + std::string(kFormat) + "\"");
  }
  const int64_t version = root.integer("version");
  if (version != kVersion) refuse("unsupported version " + std::to_string(version));
  if (root.string("checksum") != "crc32c") {
    refuse("unsupported checksum \"" + root.string("checksum") + "\"");
  }

  CheckpointManifest manifest;
  manifest.step = root.integer("step");
  if (manifest.step < 0) refuse("negative step " + std::to_string(manifest.step));
  std::set<std::string> names;
  for (const Json& listed : root.array("files")) {
    const JsonFields entry(listed, kContext, "files[].");
    ManifestFile file;
    file.name = entry.string("name");
    if (!is_valid_data_file_name(file.name)) refuse("invalid file name \"" + file.name + "\"");
    if (!names.insert(file.name).second) refuse("file \"" + file.name + "\" is listed twice");
    const int64_t bytes = entry.integer("bytes");
    if (bytes < 0) refuse("file \"" + file.name + "\" has a negative size");
    file.bytes = static_cast<uint64_t>(bytes);
    const std::string& crc = entry.string("crc32c");
    const auto parsed = std::from_chars(crc.data(), crc.data() + crc.size(), file.crc32c, 16);
    if (crc.size() != 8 || parsed.ec != std::errc() || parsed.ptr != crc.data() + crc.size()) {
      refuse("file \"" + file.name + "\" has checksum \"" + crc + "\", not 8 hex digits");
    }
    manifest.files.push_back(std::move(file));
  }
  root.object("state");  // refuses any other kind
  manifest.state = root.get("state");
  return manifest;
}

}  // namespace mixtrain
