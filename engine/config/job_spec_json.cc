// Why: see job_spec_json.h. Both directions walk for_each_section_field,
// so a key added there travels without touching this file.
#include "engine/config/job_spec_json.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "engine/config/job_spec_fields.h"

namespace mixtrain::config {
namespace {

constexpr const char* kContext = "job spec JSON";

[[noreturn]] void refuse(const std::string& what) {
  throw EngineError(ErrorCode::kInvalidArgument, std::string(kContext) + ": " + what);
}

// ---- to JSON ----------------------------------------------------------

Json encode(int64_t value) { return value; }
Json encode(double value) { return value; }
Json encode(bool value) { return value; }
Json encode(const std::string& value) { return value; }
Json encode(DType value) { return dtype_name(value); }
Json encode(const std::array<double, 2>& value) { return Json::array({value[0], value[1]}); }

template <class E>
requires requires { enum_names(E{}); }
Json encode(E value) { return std::string(enum_name(value)); }

Json encode(const Fp8Spec& value) {
  Json out = Json::object();
  for_each_fp8_field(
      [&](std::string_view key, auto member) { out[std::string(key)] = encode(value.*member); });
  return out;
}

template <class T>
Json encode(const std::optional<T>& value) {
  return value ? encode(*value) : Json(nullptr);
}

// ---- from JSON --------------------------------------------------------

// One section's object, with the "section.key" path for errors.
struct Field {
  const JsonFields& fields;
  std::string_view key;
  std::string path;  // "train.steps"
};

void decode(const Field& f, int64_t& out) { out = f.fields.integer(f.key); }
void decode(const Field& f, double& out) { out = f.fields.number(f.key); }
void decode(const Field& f, bool& out) { out = f.fields.boolean(f.key); }
void decode(const Field& f, std::string& out) { out = f.fields.string(f.key); }

void decode(const Field& f, DType& out) {
  const std::optional<DType> parsed = parse_compute_dtype(f.fields.string(f.key));
  if (!parsed) refuse("\"" + f.path + "\" is no compute dtype: " + f.fields.string(f.key));
  out = *parsed;
}

void decode(const Field& f, std::array<double, 2>& out) {
  const Json& list = f.fields.array(f.key);
  if (list.size() != 2 || !list[0].is_number() || !list[1].is_number())
    refuse("\"" + f.path + "\" must be a list of two numbers");
  out = {list[0].get<double>(), list[1].get<double>()};
}

template <class E>
requires requires { enum_names(E{}); }
void decode(const Field& f, E& out) {
  const std::optional<E> parsed = parse_enum<E>(f.fields.string(f.key));
  if (!parsed) refuse("\"" + f.path + "\" must be one of " + enum_choices<E>());
  out = *parsed;
}

void decode(const Field& f, Fp8Spec& out);

template <class T>
void decode(const Field& f, std::optional<T>& out) {
  if (f.fields.get(f.key).is_null()) {
    out.reset();
    return;
  }
  T value{};
  decode(f, value);
  out = std::move(value);
}

// The keys of each section, in for_each_section_field's order.
const std::map<std::string_view, std::vector<std::string_view>>& section_keys() {
  static const auto keys = [] {
    std::map<std::string_view, std::vector<std::string_view>> out;
    for_each_section_field([&](std::string_view section, std::string_view key, auto, auto) {
      out[section].push_back(key);
    });
    return out;
  }();
  return keys;
}

// Refuses a key of `object` that `allowed` lacks; `where` is "" or "train.".
template <class Keys>
void refuse_unknown_keys(const Json& object, const Keys& allowed, const std::string& where) {
  for (const auto& item : object.items()) {
    if (std::find(allowed.begin(), allowed.end(), item.key()) == allowed.end())
      refuse("unknown key \"" + where + item.key() + "\"");
  }
}

// precision.fp8's object: every key present, no other.
void decode(const Field& f, Fp8Spec& out) {
  const JsonFields fields = f.fields.object(f.key);
  std::vector<std::string_view> keys;
  for_each_fp8_field([&](std::string_view key, auto) { keys.push_back(key); });
  refuse_unknown_keys(f.fields.get(f.key), keys, f.path + ".");
  for_each_fp8_field([&](std::string_view key, auto member) {
    decode(Field{fields, key, f.path + "." + std::string(key)}, out.*member);
  });
}

// True when `key` of `section` is `auto` in `spec`.
bool written_auto(const JobSpec& spec, std::string_view section, std::string_view key) {
  bool AutoKeys::*automatic = auto_key(section, key);
  return automatic != nullptr && spec.auto_keys.*automatic;
}

}  // namespace

Json job_spec_to_json(const JobSpec& spec) {
  Json out = Json::object();
  out["name"] = spec.name;
  for_each_section_field(
      [&](std::string_view section, std::string_view key, auto section_member, auto field_member) {
        out[std::string(section)][std::string(key)] =
            written_auto(spec, section, key) ? Json("auto")
                                             : encode((spec.*section_member).*field_member);
      });
  return out;
}

JobSpec job_spec_from_json(const Json& json) {
  const JsonFields top(json, kContext);
  std::vector<std::string_view> top_keys = {"name"};
  for (const auto& [section, keys] : section_keys()) top_keys.push_back(section);
  refuse_unknown_keys(json, top_keys, "");
  for (const auto& [section, keys] : section_keys()) {
    top.object(section);  // present, and an object
    refuse_unknown_keys(top.get(section), keys, std::string(section) + ".");
  }
  JobSpec spec;
  spec.name = top.string("name");
  for_each_section_field(
      [&](std::string_view section, std::string_view key, auto section_member, auto field_member) {
        const JsonFields fields = top.object(section);
        if (bool AutoKeys::*automatic = auto_key(section, key)) {
          const Json& value = fields.get(key);
          spec.auto_keys.*automatic = value.is_string() && value.get<std::string>() == "auto";
          if (spec.auto_keys.*automatic) return;
        }
        decode(Field{fields, key, std::string(section) + "." + std::string(key)},
               (spec.*section_member).*field_member);
      });
  return spec;
}

}  // namespace mixtrain::config
