#!/usr/bin/env bash
# Why: a lent GPU machine has no apt and no network, so what its build
# lacks travels with the working tree. Run here, this copies the GoogleTest
# sources that Debian's googletest package installs (scripts/install-deps.sh
# pulls it in with libgtest-dev) into third_party/googletest, which git
# ignores; scripts/gpu-check.sh builds them there (MIXTRAIN_GTEST_SOURCE_DIR).
# Carry third_party/googletest along with the tree.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=${GTEST_SOURCES:-/usr/src/googletest}
if [ ! -f "$src/CMakeLists.txt" ]; then
  echo "gpu-deps: no GoogleTest sources at $src (Debian package googletest)" >&2
  exit 1
fi
rm -rf "$root/third_party/googletest"
mkdir -p "$root/third_party"
cp -r "$src" "$root/third_party/googletest"
echo "gpu-deps: $(du -sh "$root/third_party/googletest" | cut -f1) of GoogleTest sources in third_party/googletest"
