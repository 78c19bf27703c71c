// Why: safetensors headers and checkpoint manifests are JSON, and the engine
// must build with only a compiler (no nlohmann-json on GPU machines). This is
// a small, strict JSON value: objects keep their key order, integers are
// int64 exactly, doubles round-trip, and malformed input is an EngineError
// naming the byte offset and what was expected.
#pragma once

#include <cstddef>
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace mixtrain {

class Json {
 public:
  enum class Type { kNull, kBool, kInt, kDouble, kString, kArray, kObject };
  using Array = std::vector<Json>;
  // Members in insertion (or document) order; keys are unique.
  using Object = std::vector<std::pair<std::string, Json>>;

  // Nesting deeper than this (arrays and objects) is a parse error, so that
  // hostile input cannot exhaust the stack.
  static constexpr int kMaxDepth = 64;

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool value) : value_(value) {}
  // Any integer type; throws EngineError(kInvalidArgument) if the value
  // does not fit int64 (a large uint64).
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  Json(T value) : value_(checked_int64(std::in_range<int64_t>(value), static_cast<int64_t>(value))) {}
  Json(double value) : value_(value) {}
  Json(std::string value) : value_(std::move(value)) {}
  Json(std::string_view value) : value_(std::string(value)) {}
  Json(const char* value) : value_(std::string(value)) {}
  Json(Array value) : value_(std::move(value)) {}
  Json(Object value) : value_(std::move(value)) {}

  // An empty array / an empty object.
  static Json array() { return Json(Array{}); }
  static Json object() { return Json(Object{}); }

  // Parses exactly one JSON value (surrounding whitespace allowed). Throws
  // EngineError(kInvalidArgument) "JSON parse error at byte N: expected ..."
  // on malformed input, invalid UTF-8, duplicate object keys, integers
  // outside int64, numbers outside double range, nesting over kMaxDepth,
  // or anything after the value.
  static Json parse(std::string_view text);

  // Compact serialization (no whitespace); parse(dump()) == *this. Doubles
  // use the shortest text that reads back to the same bits and always carry
  // a '.' or exponent so they stay doubles. Throws EngineError
  // (kInvalidArgument) for NaN/infinity or a string that is not valid UTF-8.
  std::string dump() const;

  Type type() const { return static_cast<Type>(value_.index()); }
  bool is_null() const { return type() == Type::kNull; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_int() const { return type() == Type::kInt; }
  bool is_double() const { return type() == Type::kDouble; }
  bool is_number() const { return is_int() || is_double(); }
  bool is_string() const { return type() == Type::kString; }
  bool is_array() const { return type() == Type::kArray; }
  bool is_object() const { return type() == Type::kObject; }

  // Typed access; each throws EngineError(kInvalidArgument) naming the
  // expected and the actual type when the value is of another type.
  bool as_bool() const;
  int64_t as_int() const;
  // An int converts to double; a double is returned as is.
  double as_double() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  // Object lookup: the member named `key`, or nullptr if absent. Throws if
  // this is not an object.
  const Json* find(std::string_view key) const;
  // The member named `key`; throws EngineError(kInvalidArgument) naming the
  // key if absent or if this is not an object.
  const Json& at(std::string_view key) const;
  // Sets member `key` (replacing an existing one in place, else appending)
  // and returns it. Throws if this is not an object.
  Json& set(std::string_view key, Json value);
  // Appends to an array and returns the new element. Throws if not an array.
  Json& push_back(Json value);

  // Structural equality; an int and a double are never equal.
  bool operator==(const Json& other) const = default;

 private:
  // `value` if `fits`, else throws naming the problem.
  static int64_t checked_int64(bool fits, int64_t value);

  std::variant<std::nullptr_t, bool, int64_t, double, std::string, Array, Object> value_;
};

// "null", "bool", "int", "double", "string", "array", "object".
const char* json_type_name(Json::Type type);

}  // namespace mixtrain
