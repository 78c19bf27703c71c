#!/usr/bin/env bash
# Installs the Debian packages mixtrain needs (DESIGN.md §8). Idempotent:
# when everything is present it only runs one dpkg query and returns. Never
# downloads anything but distribution packages; the CUDA toolkit is used
# when /usr/local/cuda exists but is not installed here.
#
#   scripts/install-deps.sh               build, tests, benchmarks and the deploy
#                                         checks (what `make test` and CI need)
#   scripts/install-deps.sh --build-only  only what building the three binaries
#                                         needs (MIXTRAIN_BUILD_TESTS=OFF,
#                                         MIXTRAIN_BUILD_BENCH=OFF): the Docker
#                                         images' build stages
#   scripts/install-deps.sh --docker      a Docker engine and what
#                                         scripts/compose-check.sh needs
#                                         (docker.io, docker-compose,
#                                         debootstrap, curl)
#
# Debian 12 is the reference. On Ubuntu 24.04 (the CUDA image's base) the
# build packages have the same names, except that oneDNN is left out: our
# CPU GEMM is written against oneDNN 2.x (dnnl::matmul::desc, gone in 3.0)
# and Ubuntu's libdnnl-dev version was not verified, so there the CPU
# backend uses its portable kernel (GPU workers compute with cuBLAS anyway).
set -euo pipefail

mode=all
case "${1:-}" in
  "") ;;
  --build-only) mode=build ;;
  --docker) mode=docker ;;
  *)
    echo "usage: $0 [--build-only | --docker]" >&2
    exit 2
    ;;
esac

# shellcheck disable=SC1091  # the running system's file
distro=$( (. /etc/os-release && echo "${ID:-debian}") 2>/dev/null || echo debian)

build_packages=(
  build-essential cmake pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev
  libyaml-cpp-dev
  prometheus-cpp-dev
  libcli11-dev
  libspdlog-dev libfmt-dev
  nlohmann-json3-dev
  libsqlite3-dev
  libssl-dev
  libgloo-dev
  libomp-dev
)
if [ "$distro" != ubuntu ]; then
  build_packages+=(libdnnl-dev ocl-icd-opencl-dev opencl-headers)  # dnnl-config.cmake requires OpenCL
fi

# Tests, benchmarks, the PyTorch parity checks and the deploy-file checks.
dev_packages=(
  git openssl sqlite3
  libgtest-dev libgmock-dev
  libbenchmark-dev
  python3 python3-numpy python3-torch python3-yaml
  prometheus
  docker-compose
  qemu-user  # the engine's tests on emulated AVX2-only and baseline CPUs
)

# scripts/compose-check.sh: the engine, compose, base images made from
# Debian's mirror when no registry answers, and curl for the HTTP checks.
docker_packages=(docker.io docker-compose debootstrap curl)

case "$mode" in
  build) packages=("${build_packages[@]}") ;;
  docker) packages=("${docker_packages[@]}") ;;
  *) packages=("${build_packages[@]}" "${dev_packages[@]}") ;;
esac

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
