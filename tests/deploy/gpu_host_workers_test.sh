#!/usr/bin/env bash
# Why: deploy/gpu-host-workers.sh is the entrypoint of the one-container-
# per-GPU-host service, and no GPU machine runs our tests. With a fake
# nvidia-smi listing two GPUs and a fake mixtrain-worker that records its
# arguments, it must start one worker per GPU (cuda:0 with metrics on 9401,
# cuda:1 on 9402, each with the arguments it was given), stop both on
# SIGTERM, and when one worker dies stop the other and exit with the dead
# one's status. Without a GPU it must refuse with exit 2.
#   gpu_host_workers_test.sh SOURCE_DIR
set -euo pipefail
script=$1/deploy/gpu-host-workers.sh
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  tail -n +1 "$work"/*.log "$work"/records/* >&2 2>/dev/null || true
  exit 1
}
mkdir "$work/bin" "$work/records"
cat >"$work/bin/nvidia-smi" <<'SH'
#!/bin/sh
printf 'GPU 0: NVIDIA H200 (UUID: GPU-0)\nGPU 1: NVIDIA H200 (UUID: GPU-1)\n'
SH
# The fake worker: records its arguments, then waits; "die" in
# $work/records/die-<backend> makes it exit 3.
cat >"$work/bin/fake-worker" <<SH
#!/usr/bin/env bash
backend=""
for a in "\$@"; do case \$a in --backend=*) backend=\${a#--backend=} ;; esac; done
echo "\$*" >"$work/records/\$backend"
trap 'echo stopped >>"$work/records/\$backend"; exit 0' TERM
while [ ! -e "$work/records/die-\$backend" ]; do sleep 0.1; done
exit 3
SH
chmod +x "$work/bin/"*
await() {  # await FILE PATTERN: until FILE holds PATTERN (20 s at most)
  for _ in $(seq 200); do grep -qF -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  fail "$1 never held '$2'"
}
start() {
  rm -f "$work/records/"*
  PATH="$work/bin:$PATH" MIXTRAIN_WORKER=fake-worker \
    bash "$script" --coordinator=coordinator:50051 --threads=4 >"$work/run.log" 2>&1 &
  pid=$!
  await "$work/records/cuda:0" "--coordinator=coordinator:50051 --threads=4 --backend=cuda:0 --metrics-listen=0.0.0.0:9401"
  await "$work/records/cuda:1" "--coordinator=coordinator:50051 --threads=4 --backend=cuda:1 --metrics-listen=0.0.0.0:9402"
}

# SIGTERM (docker stop) stops every worker.
start
kill -TERM $pid
rc=0
wait $pid || rc=$?
[ "$rc" = 143 ] || fail "exit $rc after SIGTERM, expected 143"
await "$work/records/cuda:0" stopped
await "$work/records/cuda:1" stopped

# One worker dies: the other is stopped, and its status is the container's.
start
touch "$work/records/die-cuda:1"
rc=0
wait $pid || rc=$?
[ "$rc" = 3 ] || fail "exit $rc after a worker exited 3"
await "$work/records/cuda:0" stopped

# No GPU: a refusal that says so.
rc=0
PATH="$work/bin:$PATH" MIXTRAIN_GPUS=0 bash "$script" >"$work/none.log" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "exit $rc without a GPU, expected 2"
grep -q "no GPU visible" "$work/none.log" || fail "the refusal does not say why"
echo PASS
