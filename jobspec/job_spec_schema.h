// Why: one table of every job spec key (DESIGN.md §4) with the code that
// types its YAML value, shared by the YAML reader and by --set overrides so
// that a key means the same thing wherever it is written.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/config/job_spec.h"

namespace mixtrain::jobspec {

// Converts `value` to the key's type and stores it in `spec`. Returns an
// empty string on success, else what is wrong ("expected an integer, got
// 2.5"); `spec` is unchanged then.
using FieldSetter = std::function<std::string(const YAML::Node& value, config::JobSpec& spec)>;

struct FieldSchema {
  std::string_view key;  // "steps"
  FieldSetter set;
};

struct SectionSchema {
  std::string_view key;  // "train"
  std::vector<FieldSchema> fields;
};

struct JobSpecSchema {
  std::vector<FieldSchema> top_level_fields;  // name, version
  std::vector<SectionSchema> sections;        // model, data, train, ...

  // The field called `key` among `fields`, or nullptr.
  static const FieldSchema* find_field(const std::vector<FieldSchema>& fields,
                                       std::string_view key);
  // The section called `key`, or nullptr.
  const SectionSchema* find_section(std::string_view key) const;
  // Every key allowed at the top level: the fields, then the sections.
  std::vector<std::string_view> top_level_keys() const;
  // Every key allowed inside `section`.
  static std::vector<std::string_view> keys_of(const SectionSchema& section);
};

// The schema of job spec version 1 (built once, never modified).
const JobSpecSchema& job_spec_schema();

// "2.5", "'abc'", "a list", "a map" or "nothing": how error messages name
// the YAML value a user wrote.
std::string describe_yaml_value(const YAML::Node& value);

}  // namespace mixtrain::jobspec
