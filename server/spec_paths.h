// Why: workers read a submitted job's files under the coordinator's
// --data-root, so a spec may only name files there: a path that is absolute,
// climbs out with "..", or follows a symlink out of the root would let a
// client read any file a worker can, and the checkpoint directory is the
// coordinator's to place (under --checkpoint-root), never the client's.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "engine/config/job_spec.h"

namespace mixtrain::server {

// Every problem with the files `spec` names, one message each naming the
// key ("data.train: 'x.txt' does not exist under the data root"); empty
// when data.train, data.val and model.init_from are each "builtin:*" or a
// relative path to an existing file inside `data_root` (an absolute,
// canonical directory) and checkpoint.dir is unset.
std::vector<std::string> check_spec_paths(const config::JobSpec& spec,
                                          const std::filesystem::path& data_root);

}  // namespace mixtrain::server
