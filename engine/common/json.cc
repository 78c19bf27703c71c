// Why: the strict JSON reader and writer behind json.h. The parser is a
// recursive descent over bytes with an explicit depth limit; every error
// names the byte offset and what was expected there.
#include "engine/common/json.h"

#include <charconv>
#include <cmath>
#include <string_view>
#include <unordered_set>

#include "engine/common/error.h"

namespace mixtrain {
namespace {

// Length of the well-formed UTF-8 sequence starting at s[pos] (RFC 3629:
// no overlongs, no surrogates, nothing above U+10FFFF), or 0 if none.
size_t utf8_sequence_length(std::string_view s, size_t pos) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) return 1;
  size_t length;
  unsigned char second_min = 0x80, second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;
    if (lead == 0xED) second_max = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;
    if (lead == 0xF4) second_max = 0x8F;
  } else {
    return 0;
  }
  if (pos + length > s.size()) return 0;
  if (byte(pos + 1) < second_min || byte(pos + 1) > second_max) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(pos + i) < 0x80 || byte(pos + i) > 0xBF) return 0;
  }
  return length;
}

void append_utf8(std::string& out, uint32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Json parse_document() {
    skip_whitespace();
    Json value = parse_value(0);
    skip_whitespace();
    if (pos_ != text_.size()) fail("end of input after the value");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& expected) const { fail_at(pos_, expected); }
  [[noreturn]] void fail_at(size_t offset, const std::string& expected) const {
    std::string found = offset < text_.size()
                            ? "'" + std::string(1, text_[offset]) + "'"
                            : std::string("end of input");
    if (offset < text_.size() && static_cast<unsigned char>(text_[offset]) < 0x20) {
      found = "control byte " + std::to_string(static_cast<int>(text_[offset]));
    }
    throw EngineError(ErrorCode::kInvalidArgument, "JSON parse error at byte " +
                                                       std::to_string(offset) + ": expected " +
                                                       expected + ", found " + found);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) {
      ++pos_;
    }
  }

  void expect_literal(std::string_view literal) {
    for (char c : literal) {
      if (at_end() || peek() != c) {
        std::string expected(1, '\'');  // appended, not "'" + literal: GCC 12 -Wrestrict misfires
        expected.append(literal).push_back('\'');
        fail(expected);
      }
      ++pos_;
    }
  }

  Json parse_value(int depth) {
    if (at_end()) fail("a value");
    switch (peek()) {
      case '{': return parse_object(depth + 1);
      case '[': return parse_array(depth + 1);
      case '"': return Json(parse_string());
      case 't': expect_literal("true"); return Json(true);
      case 'f': expect_literal("false"); return Json(false);
      case 'n': expect_literal("null"); return Json(nullptr);
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        fail("a value");
    }
  }

  void check_depth(int depth) const {
    if (depth > Json::kMaxDepth) {
      fail_at(pos_, "nesting no deeper than " + std::to_string(Json::kMaxDepth));
    }
  }

  Json parse_object(int depth) {
    check_depth(depth);
    ++pos_;  // '{'
    Json::Object members;
    std::unordered_set<std::string> keys;
    skip_whitespace();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return Json(std::move(members));
    }
    while (true) {
      skip_whitespace();
      if (at_end() || peek() != '"') fail("a string key");
      const size_t key_offset = pos_;
      std::string key = parse_string();
      if (!keys.insert(key).second) fail_at(key_offset, "a key not already in this object");
      skip_whitespace();
      if (at_end() || peek() != ':') fail("':' after an object key");
      ++pos_;
      skip_whitespace();
      Json value = parse_value(depth);
      members.emplace_back(std::move(key), std::move(value));
      skip_whitespace();
      if (at_end()) fail("',' or '}' in an object");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return Json(std::move(members));
      }
      fail("',' or '}' in an object");
    }
  }

  Json parse_array(int depth) {
    check_depth(depth);
    ++pos_;  // '['
    Json::Array elements;
    skip_whitespace();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return Json(std::move(elements));
    }
    while (true) {
      skip_whitespace();
      elements.push_back(parse_value(depth));
      skip_whitespace();
      if (at_end()) fail("',' or ']' in an array");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return Json(std::move(elements));
      }
      fail("',' or ']' in an array");
    }
  }

  uint32_t parse_hex4() {
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      if (at_end()) fail("4 hex digits after \\u");
      const char c = peek();
      uint32_t digit;
      if (c >= '0' && c <= '9') digit = c - '0';
      else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
      else fail("4 hex digits after \\u");
      value = value * 16 + digit;
      ++pos_;
    }
    return value;
  }

  // After the 'u' of "\u": one code point, combining a surrogate pair.
  uint32_t parse_unicode_escape(size_t escape_offset) {
    const uint32_t unit = parse_hex4();
    if (unit >= 0xDC00 && unit <= 0xDFFF) {
      fail_at(escape_offset, "a high surrogate before a low surrogate \\u escape");
    }
    if (unit < 0xD800 || unit > 0xDBFF) return unit;
    if (text_.substr(pos_, 2) != "\\u") fail("a low surrogate \\u escape after a high surrogate");
    pos_ += 2;
    const uint32_t low = parse_hex4();
    if (low < 0xDC00 || low > 0xDFFF) {
      fail_at(pos_ - 6, "a low surrogate \\u escape after a high surrogate");
    }
    return 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (at_end()) fail("'\"' closing the string");
      const char c = peek();
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("an escaped control character in a string");
      if (c != '\\') {
        const size_t length = utf8_sequence_length(text_, pos_);
        if (length == 0) fail("valid UTF-8 in a string");
        out.append(text_.substr(pos_, length));
        pos_ += length;
        continue;
      }
      const size_t escape_offset = pos_;
      ++pos_;
      if (at_end()) fail("an escape character after '\\'");
      switch (peek()) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u':
          ++pos_;
          append_utf8(out, parse_unicode_escape(escape_offset));
          continue;
        default: fail("one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u after '\\'");
      }
      ++pos_;
    }
  }

  Json parse_number() {
    const size_t start = pos_;
    auto digits = [&] {
      const size_t first = pos_;
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
      return pos_ - first;
    };
    if (peek() == '-') ++pos_;
    if (at_end() || peek() < '0' || peek() > '9') fail("a digit");
    if (peek() == '0') {
      ++pos_;
      if (!at_end() && peek() >= '0' && peek() <= '9') fail("no leading zero");
    } else {
      digits();
    }
    bool integral = true;
    if (!at_end() && peek() == '.') {
      integral = false;
      ++pos_;
      if (digits() == 0) fail("a digit after '.'");
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      integral = false;
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      if (digits() == 0) fail("a digit in the exponent");
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    if (integral) {
      int64_t value = 0;
      const auto result = std::from_chars(first, last, value);
      if (result.ec != std::errc() || result.ptr != last) {
        fail_at(start, "an integer within int64 range");
      }
      return Json(value);
    }
    double value = 0;
    const auto result = std::from_chars(first, last, value);
    if (result.ec != std::errc() || result.ptr != last) {
      fail_at(start, "a number within double range");
    }
    return Json(value);
  }

  std::string_view text_;
  size_t pos_ = 0;
};

[[noreturn]] void throw_invalid(const std::string& message) {
  throw EngineError(ErrorCode::kInvalidArgument, message);
}

[[noreturn]] void throw_type_mismatch(const char* expected, Json::Type actual) {
  throw_invalid(std::string("JSON: expected ") + expected + ", found " + json_type_name(actual));
}

void dump_string(const std::string& s, std::string& out) {
  out += '"';
  size_t pos = 0;
  while (pos < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[pos]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
        } else {
          const size_t length = utf8_sequence_length(s, pos);
          if (length == 0) {
            throw_invalid("JSON serialization: string has invalid UTF-8 at byte " +
                          std::to_string(pos));
          }
          out.append(s, pos, length);
          pos += length;
          continue;
        }
    }
    ++pos;
  }
  out += '"';
}

void dump_double(double value, std::string& out) {
  if (!std::isfinite(value)) {
    throw_invalid("JSON serialization: " + std::to_string(value) +
                  " is not representable in JSON");
  }
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  const std::string_view text(buffer, result.ptr - buffer);
  out += text;
  if (text.find_first_of(".e") == std::string_view::npos) out += ".0";
}

void dump_value(const Json& value, std::string& out) {
  switch (value.type()) {
    case Json::Type::kNull: out += "null"; return;
    case Json::Type::kBool: out += value.as_bool() ? "true" : "false"; return;
    case Json::Type::kInt: out += std::to_string(value.as_int()); return;
    case Json::Type::kDouble: dump_double(value.as_double(), out); return;
    case Json::Type::kString: dump_string(value.as_string(), out); return;
    case Json::Type::kArray: {
      out += '[';
      bool first = true;
      for (const Json& element : value.as_array()) {
        if (!first) out += ',';
        first = false;
        dump_value(element, out);
      }
      out += ']';
      return;
    }
    case Json::Type::kObject: {
      out += '{';
      bool first = true;
      for (const auto& [key, member] : value.as_object()) {
        if (!first) out += ',';
        first = false;
        dump_string(key, out);
        out += ':';
        dump_value(member, out);
      }
      out += '}';
      return;
    }
  }
}

}  // namespace

const char* json_type_name(Json::Type type) {
  switch (type) {
    case Json::Type::kNull: return "null";
    case Json::Type::kBool: return "bool";
    case Json::Type::kInt: return "int";
    case Json::Type::kDouble: return "double";
    case Json::Type::kString: return "string";
    case Json::Type::kArray: return "array";
    case Json::Type::kObject: return "object";
  }
  return "unknown";
}

int64_t Json::checked_int64(bool fits, int64_t value) {
  if (!fits) throw_invalid("JSON: integer does not fit int64");
  return value;
}

Json Json::parse(std::string_view text) { return Parser(text).parse_document(); }

std::string Json::dump() const {
  std::string out;
  dump_value(*this, out);
  return out;
}

bool Json::as_bool() const {
  if (!is_bool()) throw_type_mismatch("bool", type());
  return std::get<bool>(value_);
}

int64_t Json::as_int() const {
  if (!is_int()) throw_type_mismatch("int", type());
  return std::get<int64_t>(value_);
}

double Json::as_double() const {
  if (is_int()) return static_cast<double>(std::get<int64_t>(value_));
  if (!is_double()) throw_type_mismatch("number", type());
  return std::get<double>(value_);
}

const std::string& Json::as_string() const {
  if (!is_string()) throw_type_mismatch("string", type());
  return std::get<std::string>(value_);
}

const Json::Array& Json::as_array() const {
  if (!is_array()) throw_type_mismatch("array", type());
  return std::get<Array>(value_);
}

Json::Array& Json::as_array() {
  if (!is_array()) throw_type_mismatch("array", type());
  return std::get<Array>(value_);
}

const Json::Object& Json::as_object() const {
  if (!is_object()) throw_type_mismatch("object", type());
  return std::get<Object>(value_);
}

Json::Object& Json::as_object() {
  if (!is_object()) throw_type_mismatch("object", type());
  return std::get<Object>(value_);
}

const Json* Json::find(std::string_view key) const {
  for (const auto& [name, member] : as_object()) {
    if (name == key) return &member;
  }
  return nullptr;
}

const Json& Json::at(std::string_view key) const {
  const Json* member = find(key);
  if (member == nullptr) throw_invalid("JSON: missing key \"" + std::string(key) + "\"");
  return *member;
}

Json& Json::set(std::string_view key, Json value) {
  Object& members = as_object();
  for (auto& [name, member] : members) {
    if (name == key) {
      member = std::move(value);
      return member;
    }
  }
  members.emplace_back(std::string(key), std::move(value));
  return members.back().second;
}

Json& Json::push_back(Json value) {
  Array& elements = as_array();
  elements.push_back(std::move(value));
  return elements.back();
}

}  // namespace mixtrain
