// Why: whatever a client or worker sends is copied onward: into error
// messages, the job database, every watcher's stream. One SubmitJob with a
// 3.9 MB source_name and 50 unknown keys took the coordinator to 1.2 GB
// (issue 13). Every request is measured here before anything else reads
// it: each string and bytes field, at any depth, and each repeated field
// has a bound, a generous default unless the table in request_bounds.cc
// names the field. Going through protobuf reflection means a field added
// later is bounded without anyone remembering to.
#pragma once

#include <google/protobuf/message.h>

#include <absl/status/status.h>

namespace mixtrain::server {

// OK when every field of `request` is within its bound; otherwise
// INVALID_ARGUMENT naming the field, its size and the bound (never its
// contents).
absl::Status check_request_bounds(const google::protobuf::Message& request);

}  // namespace mixtrain::server
