// Why: see job_spec_yaml.h. The reader walks the YAML tree against the
// schema table, remembers where each key was written so that errors found
// later by config::validate() can still point at a line, and treats --set
// overrides as one more place a key can be written.
#include "jobspec/job_spec_yaml.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "jobspec/closest_key.h"
#include "jobspec/job_spec_schema.h"

namespace mixtrain::jobspec {
namespace {

std::string join_keys(const std::vector<std::string_view>& keys) {
  std::string out;
  for (std::string_view key : keys) {
    if (!out.empty()) out += ", ";
    out += key;
  }
  return out;
}

std::string unknown_key_message(std::string_view key, const std::vector<std::string_view>& known) {
  const std::string quoted = "unknown key '" + std::string(key) + "'";
  if (const std::optional<std::string_view> suggestion = closest_key(key, known))
    return quoted + " (did you mean '" + std::string(*suggestion) + "'?)";
  return quoted + " (known keys: " + join_keys(known) + ")";
}

std::string join_path(std::string_view section, std::string_view key) {
  return section.empty() ? std::string(key) : std::string(section) + "." + std::string(key);
}

class JobSpecReader {
 public:
  explicit JobSpecReader(std::string_view source) : source_(source), root_location_(source) {}

  // Reads the one document in `yaml_text` into the spec.
  void read_document(std::string_view yaml_text) {
    std::vector<YAML::Node> documents;
    try {
      documents = YAML::LoadAll(std::string(yaml_text));
    } catch (const YAML::DeepRecursion& error) {  // yaml-cpp says only "bad file"
      fail(line_location(error.mark), "",
           "nested too deeply (more than " + std::to_string(error.depth() - 1) +
               " levels of lists or maps; a job spec needs 3)");
      return;
    } catch (const YAML::Exception& error) {
      fail(line_location(error.mark), "", "YAML syntax error: " + error.msg);
      return;
    }
    if (documents.size() > 1) {
      fail(line_location(documents[1].Mark()), "",
           "expected one YAML document, found " + std::to_string(documents.size()));
      return;
    }
    if (documents.empty() || documents[0].IsNull()) {
      fail(source_, "", "the document is empty; a job spec needs at least name and data.train");
      return;
    }
    const YAML::Node& root = documents[0];
    root_location_ = line_location(root.Mark());
    if (!root.IsMap()) {
      fail(root_location_, "",
           "expected a map of keys (" + join_keys(schema_.top_level_keys()) +
               ") at the top level, got " + describe_yaml_value(root));
      return;
    }
    read_map(root, "", schema_.top_level_keys(),
             [&](const std::string& key, const std::string& location, const YAML::Node& value) {
               read_top_level_key(key, location, value);
             });
  }

  // Applies one "key.path=value" override.
  void apply_override(const std::string& assignment) {
    const std::string location = "--set " + assignment;
    const size_t equals = assignment.find('=');
    if (equals == std::string::npos || equals == 0) {
      fail(location, "", "expected key=value, e.g. --set train.steps=50");
      return;
    }
    const std::string path = assignment.substr(0, equals);
    YAML::Node value;
    try {
      value = YAML::Load(assignment.substr(equals + 1));
    } catch (const YAML::Exception& error) {
      fail(location, path, "the value is not valid YAML: " + error.msg);
      return;
    }
    const size_t dot = path.find('.');
    const std::string head = path.substr(0, dot);
    if (const FieldSchema* field = JobSpecSchema::find_field(schema_.top_level_fields, head)) {
      if (dot != std::string::npos)
        fail(location, head, "is a value, not a section");
      else
        set_field(*field, head, location, value);
      return;
    }
    const SectionSchema* section = schema_.find_section(head);
    if (section == nullptr) {
      fail(location, "", unknown_key_message(head, schema_.top_level_keys()));
      return;
    }
    if (dot == std::string::npos) {
      fail(location, head,
           "is a section; set one of its keys (" + join_keys(JobSpecSchema::keys_of(*section)) +
               ")");
      return;
    }
    const std::string key = path.substr(dot + 1);
    const FieldSchema* field = JobSpecSchema::find_field(section->fields, key);
    if (field == nullptr) {
      fail(location, head, unknown_key_message(key, JobSpecSchema::keys_of(*section)));
      return;
    }
    set_field(*field, path, location, value);
  }

  // Runs the engine's checks when reading succeeded, and returns the outcome.
  JobSpecResult finish(const JobSpecOptions& options) {
    if (errors_.empty()) {
      add_spec_errors(config::validate(spec_));
      if (options.check_files) add_spec_errors(config::check_files(spec_, options.base_dir));
    }
    JobSpecResult result;
    if (errors_.empty()) result.spec = std::move(spec_);
    result.errors = std::move(errors_);
    return result;
  }

 private:
  void fail(std::string location, std::string key_path, std::string message) {
    errors_.push_back({std::move(location), std::move(key_path), std::move(message)});
  }

  std::string line_location(const YAML::Mark& mark) const {
    if (mark.is_null() || mark.line < 0) return source_;
    return source_ + ":" + std::to_string(mark.line + 1);
  }

  // Calls on_key(key, location, value) for each entry of `map` whose key is
  // in `known`, reporting odd, duplicate and unknown keys instead.
  template <class OnKey>
  void read_map(const YAML::Node& map, std::string_view path,
                const std::vector<std::string_view>& known, OnKey on_key) {
    std::map<std::string, std::string, std::less<>> first_seen;
    for (const auto& entry : map) {  // entries are values: iterator-> would dangle
      const YAML::Node& key_node = entry.first;
      const std::string location = line_location(key_node.Mark());
      if (!key_node.IsScalar()) {
        fail(location, std::string(path),
             "keys must be plain names, got " + describe_yaml_value(key_node));
        continue;
      }
      const std::string& key = key_node.Scalar();
      if (const auto previous = first_seen.find(key); previous != first_seen.end()) {
        fail(location, join_path(path, key),
             "duplicate key (first given at " + previous->second + ")");
        continue;
      }
      first_seen.emplace(key, location);
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        fail(location, std::string(path), unknown_key_message(key, known));
        continue;
      }
      on_key(key, location, entry.second);
    }
  }

  void read_top_level_key(const std::string& key, const std::string& location,
                          const YAML::Node& value) {
    if (const FieldSchema* field = JobSpecSchema::find_field(schema_.top_level_fields, key)) {
      set_field(*field, key, location, value);
      return;
    }
    const SectionSchema& section = *schema_.find_section(key);
    const std::vector<std::string_view> keys = JobSpecSchema::keys_of(section);
    locations_[key] = location;
    if (!value.IsMap()) {
      fail(location, key,
           "expected a map of keys (" + join_keys(keys) + "), got " + describe_yaml_value(value));
      return;
    }
    read_map(value, key, keys,
             [&](const std::string& field_key, const std::string& field_location,
                 const YAML::Node& field_value) {
               set_field(*JobSpecSchema::find_field(section.fields, field_key),
                         join_path(key, field_key), field_location, field_value);
             });
  }

  void set_field(const FieldSchema& field, const std::string& path, const std::string& location,
                 const YAML::Node& value) {
    locations_[path] = location;
    std::string error = field.set(value, spec_);
    if (!error.empty()) fail(location, path, std::move(error));
  }

  // Where `key_path` was written: its own line, else its section's, else the document's.
  std::string location_of(const std::string& key_path) const {
    if (const auto found = locations_.find(key_path); found != locations_.end())
      return found->second;
    const size_t dot = key_path.find('.');
    if (dot != std::string::npos) {
      if (const auto section = locations_.find(key_path.substr(0, dot));
          section != locations_.end())
        return section->second;
    }
    return root_location_;
  }

  void add_spec_errors(const std::vector<config::SpecError>& errors) {
    for (const config::SpecError& error : errors)
      fail(location_of(error.key_path), error.key_path, error.message);
  }

  const JobSpecSchema& schema_ = job_spec_schema();
  std::string source_;
  std::string root_location_;  // the document's first line, or the bare source name
  config::JobSpec spec_;
  std::map<std::string, std::string> locations_;  // key path -> where it was last written
  std::vector<JobSpecError> errors_;
};

}  // namespace

std::string JobSpecError::to_string() const {
  std::string out = location + ": ";
  if (!key_path.empty()) out += key_path + ": ";
  return out + message;
}

JobSpecResult parse_job_spec(std::string_view yaml_text, std::string_view source_name,
                             const JobSpecOptions& options) {
  JobSpecReader reader(source_name);
  reader.read_document(yaml_text);
  for (const std::string& assignment : options.overrides) reader.apply_override(assignment);
  return reader.finish(options);
}

JobSpecResult load_job_spec_file(const std::filesystem::path& path, const JobSpecOptions& options) {
  std::ifstream file(path);
  if (!file.is_open()) {
    JobSpecResult result;
    result.errors.push_back({path.string(), "", "cannot open the job spec file"});
    return result;
  }
  std::ostringstream text;
  text << file.rdbuf();
  return parse_job_spec(text.str(), path.string(), options);
}

}  // namespace mixtrain::jobspec
