// Why: on a service worker a job's input files (data.train, data.val,
// model.init_from; tokenizer files once specs name them) must come from
// beneath the coordinator's --data-root. The coordinator checks the spec's
// paths at submit, but a file or a directory on the way can be replaced by
// a symlink afterwards (measured: a job then trained on a file outside the
// root), so containment is enforced when the worker opens the file, by the
// kernel: the path is resolved beneath a descriptor of the root with
// openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), or, on kernels without
// openat2, one component at a time with O_NOFOLLOW, following no symlink
// and no "..". Every input file is opened through open_input_file.
#pragma once

#include <filesystem>
#include <optional>

#include "engine/common/unique_fd.h"

namespace mixtrain {

// How a path is resolved beneath the root.
enum class BeneathResolution {
  kKernel,         // openat2, or the component walk where the kernel lacks it
  kComponentWalk,  // the component walk alone (what kernels before 5.6 get)
};

// Opens the input file `path` read-only. Without a `data_root` (a plain
// `mixtrain train`) the path is opened as given. With one, `path` is taken
// relative to `data_root` and must stay beneath it at every step: an
// absolute path, a ".." above the root, a symlink leading outside it (or,
// with the component walk, any symlink or "..") is refused. Throws
// EngineError(kInvalidArgument) "'<path>' escapes the data root <root>
// (<how>)" for such a path, and "cannot open '<path>'[ beneath the data
// root <root>]: <reason>" for any other failure.
UniqueFd open_input_file(const std::filesystem::path& path,
                         const std::optional<std::filesystem::path>& data_root,
                         BeneathResolution resolution = BeneathResolution::kKernel);

}  // namespace mixtrain
