// Why: the whole product speaks JSON through one library, nlohmann-json.
// Checkpoint manifests, safetensors headers and summaries that other
// processes send need more than its defaults: a reader that refuses
// duplicate keys, integers outside int64 and hostile nesting, a writer
// that refuses what JSON cannot carry (NaN, infinity, invalid UTF-8)
// instead of writing null, and typed member access for format readers.
// All of them throw EngineError(kInvalidArgument).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace mixtrain {

// Objects keep their insertion (or document) order: the summary's key
// order is a contract (DESIGN.md §5) and manifests read best in order.
using Json = nlohmann::ordered_json;

// Nesting deeper than this (arrays and objects) is refused by default, so
// that neither parsing nor the recursive copy/dump/destroy of the result
// can exhaust the stack.
inline constexpr int kMaxJsonDepth = 64;
// An object with more keys than this is refused by default: no document
// the product reads needs as many (a safetensors header lists one key per
// tensor), and each key costs memory and, in Json's objects, a linear
// search by whoever looks a member up.
inline constexpr size_t kMaxJsonObjectKeys = size_t{1} << 20;

// What parse_json refuses beyond malformed JSON.
struct JsonLimits {
  int max_depth = kMaxJsonDepth;                // nesting of arrays and objects
  size_t max_object_keys = kMaxJsonObjectKeys;  // keys of any one object
};

// Parses exactly one JSON value (surrounding whitespace allowed) in time
// linear in its size. Every integer comes back as int64
// (`is_number_integer()`, `get<int64_t>()`). Throws
// EngineError(kInvalidArgument) "JSON parse error ..." naming the byte
// offset for malformed input and invalid UTF-8, and the offending key or
// number for a duplicate object key, an integer outside int64 or a number
// outside double range; "nesting deeper than N" past `limits.max_depth`
// and "an object with more than N keys" past `limits.max_object_keys`.
Json parse_json(std::string_view text, JsonLimits limits = {});

// nlohmann's dump (compact for indent < 0; doubles in the shortest text
// that reads back to the same bits, always with '.' or an exponent), but
// throws EngineError(kInvalidArgument) for a NaN or infinite number and for
// a string that is not valid UTF-8.
std::string dump_json(const Json& value, int indent = -1);

// `value` as a JSON number, or null when unset.
inline Json number_or_null(const std::optional<double>& value) {
  return value ? Json(*value) : Json(nullptr);
}

// Reads typed members of one JSON object for a format's reader. nlohmann's
// get<>() converts between number kinds silently and throws its own
// exceptions; these refuse a member of the wrong kind and throw
// EngineError(kInvalidArgument) "<context>: ..." naming the member's path.
class JsonFields {
 public:
  // Throws unless `object` is an object. `context` names the document (for
  // example "checkpoint manifest"); `path` is this object's place in it.
  JsonFields(const Json& object, std::string context, std::string path = "");

  const Json& get(std::string_view key) const;  // any kind; throws if missing
  int64_t integer(std::string_view key) const;
  double number(std::string_view key) const;                          // an integer or a float
  std::optional<double> optional_number(std::string_view key) const;  // null is unset
  const std::string& string(std::string_view key) const;
  std::optional<std::string> optional_string(std::string_view key) const;  // null is unset
  bool boolean(std::string_view key) const;
  const Json& array(std::string_view key) const;
  JsonFields object(std::string_view key) const;

 private:
  [[noreturn]] void refuse_kind(std::string_view key, const char* expected) const;

  const Json& object_;
  std::string context_;
  std::string path_;  // "" or ending in '.'
};

}  // namespace mixtrain
