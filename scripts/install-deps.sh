#!/usr/bin/env bash
# Installs every Debian package that building, testing and benchmarking
# mixtrain need (DESIGN.md §8). Idempotent: when everything is present it
# only runs one dpkg query and returns. Never downloads anything but Debian
# packages; the CUDA toolkit is used when /usr/local/cuda exists but is not
# installed here.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev
  libyaml-cpp-dev
  prometheus-cpp-dev openssl
  libgtest-dev libgmock-dev
  libbenchmark-dev
  libcli11-dev
  libspdlog-dev libfmt-dev
  nlohmann-json3-dev
  libsqlite3-dev sqlite3
  libdnnl-dev ocl-icd-opencl-dev opencl-headers  # dnnl-config.cmake requires OpenCL
  libgloo-dev
  libomp-dev
  python3 python3-numpy python3-torch
  prometheus
  docker-compose
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
# prometheus is installed for promtool and for tests that start their own
# server; the packaged service is not wanted on a build machine.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  "${sudo_cmd[@]}" systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
echo "install-deps: done"
