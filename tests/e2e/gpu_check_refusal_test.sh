#!/usr/bin/env bash
# Why: scripts/gpu-check.sh is what a lent GPU machine runs, once; it used
# to build for minutes and exit 0 having run no GPU test. On a machine
# whose nvidia-smi lists no GPU (faked here, so the test means the same
# everywhere) it must exit 2 at once, saying so, having built nothing.
#   gpu_check_refusal_test.sh SOURCE_DIR
set -euo pipefail
root=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  cat "$work/out.log" >&2 || true
  exit 1
}
mkdir "$work/bin"
cat >"$work/bin/nvidia-smi" <<'SH'
#!/bin/sh
echo "No devices were found"
exit 6
SH
chmod +x "$work/bin/nvidia-smi"
rc=0
PATH="$work/bin:$PATH" BUILD_DIR="$work/build" bash "$root/scripts/gpu-check.sh" "$work/results" \
  >"$work/out.log" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "exit $rc, expected 2"
grep -q "FAIL: no usable GPU here (nvidia-smi -L: No devices were found); nothing was built" \
  "$work/out.log" || fail "the refusal does not say why"
grep -q "no usable GPU" "$work/results/summary.txt" || fail "summary.txt does not say why"
[ ! -e "$work/build" ] || fail "it configured or built something"
echo PASS
