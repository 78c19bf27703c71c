// Why: see request_bounds.h.
#include "server/request_bounds.h"

#include <map>
#include <string>

#include "server/job_service.h"

namespace mixtrain::server {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Ids, names, addresses, keys, scopes and reasons: far beyond any real one.
constexpr size_t kDefaultStringBytes = 1024;
// Running tasks, devices, Store keys, log lines of one call, states.
constexpr int kDefaultRepeated = 4096;

// Fields that legitimately carry more, by full name.
const std::map<std::string, size_t>& string_bounds() {
  static const std::map<std::string, size_t> bounds = {
      {"mixtrain.v1.SubmitJobRequest.spec_yaml", kMaxSpecBytes},
      {"mixtrain.v1.SubmitJobRequest.source_name", 256},
      {"mixtrain.v1.ReportProgressRequest.summary_json", 1 << 20},
      {"mixtrain.v1.ReportProgressRequest.message", 64 << 10},
      {"mixtrain.v1.ReportLogRequest.lines", 64 << 10},  // the agent splits at 16 KiB
      {"mixtrain.v1.StoreSetRequest.value", 1 << 20},    // Gloo's address table grows with ranks
      {"mixtrain.v1.CudaDevice.name", 256},  // "NVIDIA H100 80GB HBM3": every worker lists it
  };
  return bounds;
}

size_t string_bound(const FieldDescriptor& field) {
  const auto found = string_bounds().find(std::string(field.full_name()));
  return found == string_bounds().end() ? kDefaultStringBytes : found->second;
}

absl::Status too_large(const FieldDescriptor& field, size_t size, size_t bound,
                       const char* unit) {
  return absl::InvalidArgumentError(std::string(field.containing_type()->name()) + "." +
                                    std::string(field.name()) + " has " + std::to_string(size) +
                                    " " + unit + "; at most " + std::to_string(bound) +
                                    " are accepted");
}

absl::Status check_string(const FieldDescriptor& field, const std::string& value) {
  const size_t bound = string_bound(field);
  return value.size() > bound ? too_large(field, value.size(), bound, "bytes") : absl::OkStatus();
}

absl::Status check_message(const Message& message) {
  const Reflection& reflection = *message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection.ListFields(message, &fields);  // only the fields that are set
  for (const FieldDescriptor* field : fields) {
    const bool is_string = field->cpp_type() == FieldDescriptor::CPPTYPE_STRING;
    const bool is_message = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if (field->is_repeated()) {
      const int count = reflection.FieldSize(message, field);
      if (count > kDefaultRepeated) {
        return too_large(*field, size_t(count), size_t(kDefaultRepeated), "entries");
      }
      for (int i = 0; i < count; ++i) {
        std::string scratch;
        absl::Status status =
            is_string ? check_string(*field, reflection.GetRepeatedStringReference(
                                                 message, field, i, &scratch))
            : is_message ? check_message(reflection.GetRepeatedMessage(message, field, i))
                         : absl::OkStatus();
        if (!status.ok()) return status;
      }
    } else if (is_string) {
      std::string scratch;
      if (absl::Status status =
              check_string(*field, reflection.GetStringReference(message, field, &scratch));
          !status.ok()) {
        return status;
      }
    } else if (is_message) {
      if (absl::Status status = check_message(reflection.GetMessage(message, field));
          !status.ok()) {
        return status;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status check_request_bounds(const Message& request) { return check_message(request); }

}  // namespace mixtrain::server
