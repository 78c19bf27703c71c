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

[[noreturn]] void refuse(const std::string& problem) {
  throw EngineError(ErrorCode::kInvalidArgument, "checkpoint manifest: " + problem);
}

const Json& member(const Json& object, std::string_view key, Json::Type type) {
  const Json* value = object.find(key);
  if (value == nullptr) refuse("missing \"" + std::string(key) + "\"");
  if (value->type() != type) {
    refuse("\"" + std::string(key) + "\" is " + json_type_name(value->type()) + ", expected " +
           json_type_name(type));
  }
  return *value;
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
    Json entry = Json::object();
    entry.set("name", Json(file.name));
    entry.set("bytes", Json(file.bytes));
    entry.set("crc32c", Json(crc_hex(file.crc32c)));
    files.push_back(std::move(entry));
  }
  Json root = Json::object();
  root.set("format", Json(kFormat));
  root.set("version", Json(kVersion));
  root.set("step", Json(manifest.step));
  root.set("checksum", Json("crc32c"));
  root.set("files", std::move(files));
  root.set("state", manifest.state);
  return root.dump();
}

CheckpointManifest parse_manifest(std::string_view text) {
  const Json root = Json::parse(text);
  if (!root.is_object()) refuse("not a JSON object");
  if (member(root, "format", Json::Type::kString).as_string() != kFormat) {
    refuse("\"format\" is not \"" + std::string(kFormat) + "\"");
  }
  const int64_t version = member(root, "version", Json::Type::kInt).as_int();
  if (version != kVersion) refuse("unsupported version " + std::to_string(version));
  if (member(root, "checksum", Json::Type::kString).as_string() != "crc32c") {
    refuse("unsupported checksum \"" + root.at("checksum").as_string() + "\"");
  }

  CheckpointManifest manifest;
  manifest.step = member(root, "step", Json::Type::kInt).as_int();
  if (manifest.step < 0) refuse("negative step " + std::to_string(manifest.step));
  std::set<std::string> names;
  for (const Json& entry : member(root, "files", Json::Type::kArray).as_array()) {
    if (!entry.is_object()) refuse("a \"files\" entry is not an object");
    ManifestFile file;
    file.name = member(entry, "name", Json::Type::kString).as_string();
    if (!is_valid_data_file_name(file.name)) refuse("invalid file name \"" + file.name + "\"");
    if (!names.insert(file.name).second) refuse("file \"" + file.name + "\" is listed twice");
    const int64_t bytes = member(entry, "bytes", Json::Type::kInt).as_int();
    if (bytes < 0) refuse("file \"" + file.name + "\" has a negative size");
    file.bytes = static_cast<uint64_t>(bytes);
    const std::string& crc = member(entry, "crc32c", Json::Type::kString).as_string();
    const auto parsed = std::from_chars(crc.data(), crc.data() + crc.size(), file.crc32c, 16);
    if (crc.size() != 8 || parsed.ec != std::errc() || parsed.ptr != crc.data() + crc.size()) {
      refuse("file \"" + file.name + "\" has checksum \"" + crc + "\", not 8 hex digits");
    }
    manifest.files.push_back(std::move(file));
  }
  manifest.state = member(root, "state", Json::Type::kObject);
  return manifest;
}

}  // namespace mixtrain
