// Why: users write jobs as YAML (DESIGN.md §4) and fix them from the error
// messages alone, so every problem is reported at once with the file, the
// line and the key ("demo.yaml:7: model.heads: must divide model.dim (384),
// got 5"); the engine only ever sees a config::JobSpec that validated.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/config/job_spec.h"

namespace mixtrain::jobspec {

struct JobSpecError {
  std::string location;  // "demo.yaml:7", or "--set train.steps=0" for an override
  std::string key_path;  // "model.heads"; the enclosing section for an unknown key; may be empty
  std::string message;

  // "<location>: <key_path>: <message>", leaving out an empty key path.
  std::string to_string() const;
};

struct JobSpecOptions {
  // --set values, "key.path=value", applied in order after the document
  // and before validation; each value is read as YAML and typed by its key.
  std::vector<std::string> overrides;
  // Also check the files and directories the spec names (config::check_files).
  bool check_files = false;
  // Where relative file paths resolve for check_files; empty: the working directory.
  std::filesystem::path base_dir;
};

struct JobSpecResult {
  std::optional<config::JobSpec> spec;  // set exactly when errors is empty
  std::vector<JobSpecError> errors;     // in document order, then overrides, then validation

  bool ok() const { return errors.empty(); }
};

// Reads a job spec from `yaml_text`, naming `source_name` in errors.
// Rejects YAML syntax errors, empty or multiple documents, unknown keys
// (suggesting the closest known one), duplicate keys, wrongly typed values
// and a version other than 1; then applies the overrides and, when all of
// that succeeded, config::validate() (and check_files if asked). Errors
// point at the line of the offending key, or of its section when the key
// was left at its default. Never throws.
JobSpecResult parse_job_spec(std::string_view yaml_text, std::string_view source_name,
                             const JobSpecOptions& options = {});

// parse_job_spec on the contents of `path` (named as given in errors); an
// unreadable file is one error.
JobSpecResult load_job_spec_file(const std::filesystem::path& path,
                                 const JobSpecOptions& options = {});

}  // namespace mixtrain::jobspec
