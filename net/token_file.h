// Why: the coordinator (--auth-token-file, --join-token-file), the worker
// (--join-token-file) and the CLI (--token-file, e.g. a Docker secret in
// the coordinator's container) all read a token from a file, written by
// scripts/make-deploy-secrets.sh or by hand with a trailing newline; one
// reader keeps them agreeing on what the file holds.
#pragma once

#include <string>

namespace mixtrain::net {

// The text of the file at `path` without surrounding whitespace; empty
// when the file cannot be read or holds only whitespace.
std::string read_token_file(const std::string& path);

}  // namespace mixtrain::net
