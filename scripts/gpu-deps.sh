#!/usr/bin/env bash
# Why: a lent GPU machine has no apt and no network, so what its build
# lacks travels with the working tree. Run here, this copies the GoogleTest
# sources that Debian's googletest package installs (scripts/install-deps.sh
# pulls it in with libgtest-dev) into third_party/googletest, and the
# nlohmann-json headers (nlohmann-json3-dev) into third_party/nlohmann_json,
# both ignored by git; scripts/gpu-check.sh builds GoogleTest there
# (MIXTRAIN_GTEST_SOURCE_DIR) and CMake finds the headers there when no
# package has them. Carry third_party along with the tree.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# copy WHAT SOURCE MARKER DEST: SOURCE (which must hold MARKER) becomes
# third_party/DEST.
copy() {
  local what=$1 source=$2 marker=$3 dest=$root/third_party/$4
  if [ ! -f "$source/$marker" ]; then
    echo "gpu-deps: no $what at $source" >&2
    exit 1
  fi
  rm -rf "$dest"
  mkdir -p "$(dirname "$dest")"
  cp -r "$source" "$dest"
  echo "gpu-deps: $(du -sh "$dest" | cut -f1) of $what in ${dest#"$root"/}"
}
copy "GoogleTest sources (Debian package googletest)" "${GTEST_SOURCES:-/usr/src/googletest}" \
  CMakeLists.txt googletest
copy "nlohmann-json headers (Debian package nlohmann-json3-dev)" \
  "${NLOHMANN_HEADERS:-/usr/include/nlohmann}" json.hpp nlohmann_json/include/nlohmann
