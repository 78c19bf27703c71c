// Why: see job_spec_schema.h. Values are typed strictly: a quoted "50" is a
// string, not a number; 2.5 is not an integer; a negative count is a type
// error; ranges and cross-key rules are left to config::validate().
#include "jobspec/job_spec_schema.h"

#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>

#include "engine/config/job_spec_fields.h"

namespace mixtrain::jobspec {
namespace {

using config::JobSpec;

bool is_plain_scalar(const YAML::Node& value) { return value.IsScalar() && value.Tag() == "?"; }

std::string expected(std::string_view what, const YAML::Node& value) {
  return "expected " + std::string(what) + ", got " + describe_yaml_value(value);
}

// Parses all of `text` as T; nullopt when any character is left over.
template <class T>
std::optional<T> parse_whole(std::string_view text) {
  if (text.starts_with('+')) text.remove_prefix(1);
  T result{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), result);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return result;
}

// YAML 1.2 core schema spellings of infinity and NaN.
std::optional<double> parse_special_float(std::string_view text) {
  const bool negative = text.starts_with('-');
  if (negative || text.starts_with('+')) text.remove_prefix(1);
  if (text == ".inf" || text == ".Inf" || text == ".INF")
    return negative ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  if (!negative && (text == ".nan" || text == ".NaN" || text == ".NAN"))
    return std::numeric_limits<double>::quiet_NaN();
  return std::nullopt;
}

// What a key of each type accepts, for "expected ..." messages.
std::string accepted(const int64_t&) { return "a non-negative integer"; }

template <class E>
requires requires { config::enum_names(E{}); }
std::string accepted(const E&) { return "one of " + config::enum_choices<E>(); }

std::string decode(const YAML::Node& value, int64_t& out) {
  const std::optional<int64_t> parsed =
      is_plain_scalar(value) ? parse_whole<int64_t>(value.Scalar()) : std::nullopt;
  if (!parsed || *parsed < 0) return expected(accepted(out), value);
  out = *parsed;
  return "";
}

std::string decode(const YAML::Node& value, double& out) {
  if (!is_plain_scalar(value)) return expected("a number", value);
  std::optional<double> parsed = parse_special_float(value.Scalar());
  if (!parsed) parsed = parse_whole<double>(value.Scalar());
  if (!parsed) return expected("a number", value);
  out = *parsed;
  return "";
}

// YAML 1.2 core schema booleans only (no yes/no/on/off).
std::string decode(const YAML::Node& value, bool& out) {
  const std::string_view text = is_plain_scalar(value) ? value.Scalar() : "";
  if (text == "true" || text == "True" || text == "TRUE") {
    out = true;
  } else if (text == "false" || text == "False" || text == "FALSE") {
    out = false;
  } else {
    return expected("true or false", value);
  }
  return "";
}

std::string decode(const YAML::Node& value, std::string& out) {
  if (!value.IsScalar()) return expected("a string", value);
  out = value.Scalar();
  return "";
}

std::string decode(const YAML::Node& value, std::array<double, 2>& out) {
  const char* what = "a list of two numbers [beta1, beta2]";
  if (!value.IsSequence() || value.size() != 2) return expected(what, value);
  std::array<double, 2> decoded{};
  for (size_t i = 0; i < 2; ++i)
    if (!decode(value[i], decoded[i]).empty()) return expected(what, value);
  out = decoded;
  return "";
}

std::string decode(const YAML::Node& value, DType& out) {
  const std::optional<DType> parsed =
      value.IsScalar() ? config::parse_compute_dtype(value.Scalar()) : std::nullopt;
  if (!parsed) return expected("one of fp32, fp16, bf16, fp8", value);
  out = *parsed;
  return "";
}

template <class E>
requires requires { config::enum_names(E{}); }
std::string decode(const YAML::Node& value, E& out) {
  const std::optional<E> parsed =
      value.IsScalar() ? config::parse_enum<E>(value.Scalar()) : std::nullopt;
  if (!parsed) return expected(accepted(out), value);
  out = *parsed;
  return "";
}

// precision.fp8: a map of its own keys, each typed as above.
std::string decode(const YAML::Node& value, config::Fp8Spec& out) {
  if (!value.IsMap()) return expected("a map of fp8 settings", value);
  config::Fp8Spec decoded;
  for (const auto& item : value) {
    const std::string key = item.first.IsScalar() ? item.first.Scalar() : "";
    std::string error =
        "unknown key \"" + key + "\" (expected " + config::fp8_field_choices() + ")";
    config::for_each_fp8_field([&](std::string_view name, auto member) {
      if (name == key) {
        error = decode(item.second, decoded.*member);
        if (!error.empty()) error = key + ": " + error;
      }
    });
    if (!error.empty()) return error;
  }
  out = decoded;
  return "";
}

// Optional keys: an empty value (or null / ~) leaves them unset.
template <class T>
std::string decode(const YAML::Node& value, std::optional<T>& out) {
  if (value.IsNull()) {
    out.reset();
    return "";
  }
  T decoded{};
  std::string error = decode(value, decoded);
  if (error.empty()) out = std::move(decoded);
  return error;
}

template <class Section, class T>
FieldSchema field(std::string_view key, Section JobSpec::*section, T Section::*member) {
  return {key, [section, member](const YAML::Node& value, JobSpec& spec) {
            return decode(value, (spec.*section).*member);
          }};
}

// A key that may be `auto` (config::AutoKeys): that sets its flag, any
// other value is decoded as the key's type and clears it.
template <class Section, class T>
FieldSchema auto_field(std::string_view key, Section JobSpec::*section, T Section::*member,
                       bool config::AutoKeys::*automatic) {
  return {key, [section, member, automatic](const YAML::Node& value, JobSpec& spec) {
            T& out = (spec.*section).*member;
            const bool is_auto = value.IsScalar() && value.Scalar() == "auto";
            spec.auto_keys.*automatic = is_auto;
            if (is_auto || decode(value, out).empty()) return std::string();
            return expected(accepted(out) + " or auto", value);
          }};
}

// The schema of `key` in `section_key`.
template <class Section, class T>
FieldSchema section_field(std::string_view section_key, std::string_view key,
                          Section JobSpec::*section, T Section::*member) {
  if constexpr (requires(const T& value) { accepted(value); }) {
    if (bool config::AutoKeys::*automatic = config::auto_key(section_key, key))
      return auto_field(key, section, member, automatic);
  }
  return field(key, section, member);
}

JobSpecSchema build_schema() {
  using namespace config;
  JobSpecSchema schema;
  schema.top_level_fields = {
      {"name", [](const YAML::Node& value, JobSpec& spec) { return decode(value, spec.name); }},
      {"version",
       [](const YAML::Node& value, JobSpec&) -> std::string {
         int64_t version = 0;
         if (!decode(value, version).empty() || version != 1)
           return "only version 1 exists, got " + describe_yaml_value(value);
         return "";
       }},
  };
  config::for_each_section_field(
      [&](std::string_view section, std::string_view key, auto section_member, auto field_member) {
        if (schema.sections.empty() || schema.sections.back().key != section)
          schema.sections.push_back({section, {}});
        schema.sections.back().fields.push_back(
            section_field(section, key, section_member, field_member));
      });
  return schema;
}

}  // namespace

const FieldSchema* JobSpecSchema::find_field(const std::vector<FieldSchema>& fields,
                                             std::string_view key) {
  for (const FieldSchema& field : fields)
    if (field.key == key) return &field;
  return nullptr;
}

const SectionSchema* JobSpecSchema::find_section(std::string_view key) const {
  for (const SectionSchema& section : sections)
    if (section.key == key) return &section;
  return nullptr;
}

std::vector<std::string_view> JobSpecSchema::top_level_keys() const {
  std::vector<std::string_view> keys;
  for (const FieldSchema& field : top_level_fields) keys.push_back(field.key);
  for (const SectionSchema& section : sections) keys.push_back(section.key);
  return keys;
}

std::vector<std::string_view> JobSpecSchema::keys_of(const SectionSchema& section) {
  std::vector<std::string_view> keys;
  for (const FieldSchema& field : section.fields) keys.push_back(field.key);
  return keys;
}

const JobSpecSchema& job_spec_schema() {
  static const JobSpecSchema schema = build_schema();
  return schema;
}

std::string describe_yaml_value(const YAML::Node& value) {
  if (!value.IsDefined() || value.IsNull()) return "nothing (an empty value)";
  if (value.IsSequence()) return "a list";
  if (value.IsMap()) return "a map";
  if (is_plain_scalar(value)) {
    const std::string& text = value.Scalar();
    if (parse_whole<double>(text) || parse_special_float(text)) return text;
  }
  return "'" + value.Scalar() + "'";
}

}  // namespace mixtrain::jobspec
