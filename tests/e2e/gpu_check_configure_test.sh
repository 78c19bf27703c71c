#!/usr/bin/env bash
# Why: a lent GPU machine has CUDA, CMake and Ninja but no make and no
# GoogleTest, and one call to get the build right. This configures the way
# scripts/gpu-check.sh does there, on a PATH without make and with a fake
# nvidia-smi listing a GPU, and checks that it picks Ninja, builds
# GoogleTest from Debian's sources (/usr/src/googletest, as gpu-deps.sh
# copies them), says whether NCCL is on, and leaves the deploy tests out.
#   gpu_check_configure_test.sh SOURCE_DIR
set -euo pipefail
root=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  cat "$work/out.log" "$work/results/configure.log" >&2 || true
  exit 1
}
[ -f /usr/src/googletest/CMakeLists.txt ] || fail "Debian's googletest sources are not installed"
# This machine's tools, less make.
mkdir "$work/bin"
for tool in /usr/bin/* /usr/local/bin/*; do
  case $(basename "$tool") in make | gmake) continue ;; esac
  ln -sf "$tool" "$work/bin/$(basename "$tool")"
done
cat >"$work/bin/nvidia-smi" <<'SH'
#!/bin/sh
case "$*" in
  *driver_version*) echo "580.95.05" ;;
  -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
  *) echo "a fake nvidia-smi" ;;
esac
SH
chmod +x "$work/bin/nvidia-smi"
PATH="$work/bin" GTEST_SOURCE_DIR=/usr/src/googletest GPU_CHECK_STOP_AFTER=configure \
  BUILD_DIR="$work/build" bash "$root/scripts/gpu-check.sh" "$work/results" >"$work/out.log" 2>&1 ||
  fail "gpu-check.sh exited $?"
summary=$work/results/summary.txt
grep -q "driver 580.95.05" "$summary" || fail "the driver version is not recorded"
grep -q "with Ninja, GoogleTest built from /usr/src/googletest" "$summary" ||
  fail "not configured with Ninja and GoogleTest from sources"
grep -Eq "NCCL found \(|NCCL not found" "$summary" || fail "the summary does not say whether NCCL is on"
# The deploy tests need the service binaries an engine-only build lacks.
listed=$(ctest --test-dir "$work/build" -N)
grep -q "gpu_check_refusal" <<<"$listed" || fail "ctest lists no test: $listed"
! grep -Eq "deploy_|prometheus|grafana|metrics_conventions" <<<"$listed" || fail "deploy tests are listed: $listed"
# GoogleTest from sources builds, and the test binaries link against it.
PATH="$work/bin" cmake --build "$work/build" --target gtest_main gmock >"$work/out.log" 2>&1 ||
  fail "GoogleTest from sources did not build"
echo PASS
