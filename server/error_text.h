// Why: a status's message travels in a gRPC header, and past the peer's
// metadata limit (8 KiB by default) the client gets "received initial
// metadata size exceeds limit" instead of the message (issue 29): twenty
// problems of a spec with long keys were enough. Every status the services
// finish a call with is bounded here, once: the first problems (lines) that
// fit, then "... and M more".
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace mixtrain::server {

// At most this many lines, of at most this many bytes together, are kept.
inline constexpr size_t kMaxErrorLines = 20;
inline constexpr size_t kMaxErrorBytes = 2048;

// `text` when it is within the bounds; otherwise its first lines that fit,
// then "... and M more" (M the lines left out). A first line longer than
// the bound alone is cut (at a UTF-8 character boundary) and marked
// " [cut]". Never longer than kMaxErrorBytes plus those two marks.
std::string bounded_error_text(std::string_view text);

// `status` with its message bounded by bounded_error_text.
grpc::Status bounded_status(const grpc::Status& status);

}  // namespace mixtrain::server
