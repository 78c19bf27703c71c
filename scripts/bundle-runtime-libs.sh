#!/usr/bin/env bash
# Why: the Docker images build in a stage that has compilers and -dev
# packages and run in a slim stage of the same distribution that has
# neither. The runtime stage gets exactly the shared libraries the binaries
# were linked against, found by ldd in the build stage, rather than a second
# list of runtime package names: those differ between Debian 12 and Ubuntu
# 24.04 (sonames in the names, Ubuntu's t64 renames) and would drift from
# what CMake really linked. Same distribution on both sides, so the copies
# are the very files the build used.
#
#   scripts/bundle-runtime-libs.sh DEST BINARY...          (build stage)
#   scripts/bundle-runtime-libs.sh --check DEST BINARY...  (runtime stage)
#
# Copies every library ldd resolves for the BINARYs into DEST (one flat
# directory, file named by its soname), except those the runtime base image
# already provides or must not carry:
#   * the C library itself (libc, libm, ld-linux, ...), the same in the
#     slim image of the same release;
#   * the NVIDIA driver's libraries (libcuda, libnvidia-*), which the NVIDIA
#     container toolkit mounts from the host at run time;
#   * the CUDA libraries of the nvidia/cuda *runtime* image (cuBLAS, NCCL,
#     cudart), which would otherwise be copied a second time.
# Fails when ldd cannot resolve a library. --check, in the runtime stage,
# puts DEST last on the loader's path (ld.so.conf.d, ldconfig: a library the
# base image has itself, such as libstdc++, is taken from the base) and
# fails unless ldd resolves every library of every BINARY there.
set -euo pipefail

check=0
if [ "${1:-}" = --check ]; then
  check=1
  shift
fi
if [ $# -lt 2 ]; then
  echo "usage: $0 [--check] DEST BINARY..." >&2
  exit 2
fi
dest=$1
shift

if [ "$check" -eq 1 ]; then
  echo "$dest" >/etc/ld.so.conf.d/zz-mixtrain.conf
  ldconfig
  for binary in "$@"; do
    if ldd "$binary" | grep "not found"; then
      echo "bundle-runtime-libs: $binary is missing the libraries above" >&2
      exit 1
    fi
  done
  echo "bundle-runtime-libs: every library of $* resolves"
  exit 0
fi

mkdir -p "$dest"

provided='^(linux-vdso|ld-linux[^ ]*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libcuda|libnvidia-[^ ]*|libcublas|libcublasLt|libnccl|libcudart)\.so'

status=0
for binary in "$@"; do
  while read -r name arrow path _; do
    if [ "$arrow" != "=>" ]; then continue; fi  # ld-linux and vdso lines
    if [ "$path" = "not" ]; then
      echo "bundle-runtime-libs: $binary needs $name, which ldd cannot find" >&2
      status=1
      continue
    fi
    if [[ "$name" =~ $provided ]]; then continue; fi
    [ -e "$dest/$name" ] || cp -L "$path" "$dest/$name"
  done < <(ldd "$binary")
done
[ "$status" -eq 0 ] || exit "$status"
echo "bundle-runtime-libs: $(find "$dest" -maxdepth 1 -type f | wc -l) libraries in $dest"
