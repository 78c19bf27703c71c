// Why: the strict reader and writer of json.h. The reader is a SAX handler
// for nlohmann's parser (which is iterative, so depth costs no stack) that
// builds the document itself and refuses what nlohmann's DOM would accept.
#include "engine/common/json.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/common/error.h"

namespace mixtrain {
namespace {

// nlohmann's messages start "[json.exception.parse_error.101] parse error
// at line 1, column 5: "; the byte offset replaces that prefix.
std::string reason_of(const nlohmann::detail::exception& error) {
  std::string_view text = error.what();
  if (const size_t bracket = text.find("] "); bracket != std::string_view::npos) {
    text.remove_prefix(bracket + 2);
  }
  if (text.starts_with("parse error")) {
    if (const size_t colon = text.find(": "); colon != std::string_view::npos) {
      text.remove_prefix(colon + 2);
    }
  }
  return std::string(text);
}

class StrictBuilder {
 public:
  explicit StrictBuilder(JsonLimits limits) : limits_(limits) {}

  bool null() { return add(nullptr); }
  bool boolean(bool value) { return add(value); }
  bool number_integer(Json::number_integer_t value) { return add(value); }
  bool number_unsigned(Json::number_unsigned_t value) {
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return fail("integer " + std::to_string(value) + " is outside int64");
    }
    return add(static_cast<int64_t>(value));
  }
  bool number_float(Json::number_float_t value, const std::string& text) {
    // The lexer hands integers too large for 64 bits over as doubles.
    if (text.find_first_of(".eE") == std::string::npos) {
      return fail("integer " + text + " is outside int64");
    }
    return add(value);
  }
  bool string(std::string& value) { return add(std::move(value)); }
  bool binary(Json::binary_t&) { return fail("binary values are not JSON"); }

  bool start_object(size_t) { return open(Json::object()); }
  bool key(std::string& name) {
    std::unordered_set<std::string>& keys = keys_.back();
    if (keys.size() == limits_.max_object_keys) {
      return fail("an object with more than " + std::to_string(limits_.max_object_keys) + " keys");
    }
    if (!keys.insert(name).second) return fail("duplicate key \"" + name + "\"");
    // Appended without a lookup: the key is new, and Json's operator[]
    // would search the members one by one, n^2 / 2 compares for n keys.
    Json::object_t& members = open_.back()->get_ref<Json::object_t&>();
    members.emplace_back(std::move(name), nullptr);
    slot_ = &members.back().second;
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(size_t) { return open(Json::array()); }
  bool end_array() { return close(); }

  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& error) {
    // nlohmann counts the bytes read, the offending one included.
    const size_t offset = position == 0 ? 0 : position - 1;
    error_ = "JSON parse error at byte " + std::to_string(offset) + ": " + reason_of(error);
    return false;
  }

  Json take() { return std::move(root_); }
  const std::string& error() const { return error_; }

 private:
  bool fail(std::string problem) {
    error_ = "JSON parse error: " + std::move(problem);
    return false;
  }

  // Places `value` where the document expects the next value and returns
  // where it went.
  Json* place(Json value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    *slot_ = std::move(value);
    return slot_;
  }
  bool add(Json value) {
    place(std::move(value));
    return true;
  }
  bool open(Json container) {
    if (static_cast<int>(open_.size()) >= limits_.max_depth) {
      return fail("nesting deeper than " + std::to_string(limits_.max_depth));
    }
    open_.push_back(place(std::move(container)));
    keys_.emplace_back();
    return true;
  }
  bool close() {
    open_.pop_back();
    keys_.pop_back();
    return true;
  }

  const JsonLimits limits_;
  Json root_;
  // The containers being filled, outermost first; each lives inside its
  // parent, which is not touched again until it is closed.
  std::vector<Json*> open_;
  std::vector<std::unordered_set<std::string>> keys_;  // per open container (arrays' stay empty)
  Json* slot_ = nullptr;                               // the member `key` made
  std::string error_;
};

// The first NaN or infinite number in `value`, found without recursion.
std::optional<double> first_nonfinite(const Json& value) {
  std::vector<const Json*> pending{&value};
  while (!pending.empty()) {
    const Json* next = pending.back();
    pending.pop_back();
    if (next->is_number_float() && !std::isfinite(next->get<double>())) {
      return next->get<double>();
    }
    if (next->is_structured()) {
      for (const Json& child : *next) pending.push_back(&child);
    }
  }
  return std::nullopt;
}

}  // namespace

Json parse_json(std::string_view text, JsonLimits limits) {
  StrictBuilder builder(limits);
  if (!Json::sax_parse(text.begin(), text.end(), &builder)) {
    throw EngineError(ErrorCode::kInvalidArgument, builder.error());
  }
  return builder.take();
}

std::string dump_json(const Json& value, int indent) {
  if (const std::optional<double> bad = first_nonfinite(value)) {
    throw EngineError(ErrorCode::kInvalidArgument,
                      "JSON cannot hold the number " + std::to_string(*bad));
  }
  try {
    return value.dump(indent);
  } catch (const Json::type_error& error) {
    throw EngineError(ErrorCode::kInvalidArgument,
                      std::string("JSON cannot hold this text: ") + reason_of(error));
  }
}

JsonFields::JsonFields(const Json& object, std::string context, std::string path)
    : object_(object), context_(std::move(context)), path_(std::move(path)) {
  if (!object.is_object()) {
    throw EngineError(
        ErrorCode::kInvalidArgument,
        context_ + ": " +
            (path_.empty() ? "the document" : "\"" + path_.substr(0, path_.size() - 1) + "\"") +
            " must be an object, not " + object.type_name());
  }
}

const Json& JsonFields::get(std::string_view key) const {
  const auto found = object_.find(key);
  if (found == object_.end()) {
    throw EngineError(ErrorCode::kInvalidArgument,
                      context_ + ": missing \"" + path_ + std::string(key) + "\"");
  }
  return *found;
}

void JsonFields::refuse_kind(std::string_view key, const char* expected) const {
  throw EngineError(ErrorCode::kInvalidArgument, context_ + ": \"" + path_ + std::string(key) +
                                                     "\" must be " + expected + ", not " +
                                                     get(key).type_name());
}

int64_t JsonFields::integer(std::string_view key) const {
  const Json& value = get(key);
  if (!value.is_number_integer() ||
      (value.is_number_unsigned() &&
       value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
    refuse_kind(key, "an integer");
  }
  return value.get<int64_t>();
}

double JsonFields::number(std::string_view key) const {
  const Json& value = get(key);
  if (!value.is_number()) refuse_kind(key, "a number");
  return value.get<double>();
}

std::optional<double> JsonFields::optional_number(std::string_view key) const {
  if (get(key).is_null()) return std::nullopt;
  return number(key);
}

const std::string& JsonFields::string(std::string_view key) const {
  const Json& value = get(key);
  if (!value.is_string()) refuse_kind(key, "a string");
  return value.get_ref<const std::string&>();
}

std::optional<std::string> JsonFields::optional_string(std::string_view key) const {
  if (get(key).is_null()) return std::nullopt;
  return string(key);
}

bool JsonFields::boolean(std::string_view key) const {
  const Json& value = get(key);
  if (!value.is_boolean()) refuse_kind(key, "true or false");
  return value.get<bool>();
}

const Json& JsonFields::array(std::string_view key) const {
  const Json& value = get(key);
  if (!value.is_array()) refuse_kind(key, "an array");
  return value;
}

JsonFields JsonFields::object(std::string_view key) const {
  const Json& value = get(key);
  if (!value.is_object()) refuse_kind(key, "an object");
  return JsonFields(value, context_, path_ + std::string(key) + ".");
}

}  // namespace mixtrain
