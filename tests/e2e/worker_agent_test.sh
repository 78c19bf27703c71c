#!/usr/bin/env bash
# Why: operators and scripts start `mixtrain-worker` and stop it with
# signals (docker stop, Ctrl-C); it must refuse bad flags with exit 2,
# serve /metrics on the port it announces even before any coordinator
# answers, keep retrying an absent coordinator instead of exiting, and end
# cleanly (exit 0) on SIGTERM and SIGINT. This drives the real binary.
#   worker_agent_test.sh MIXTRAIN_WORKER_BINARY
set -euo pipefail
worker=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Bad flags: exit 2 with a message, before anything starts.
expect_usage_error() {  # expected-text args...
  local expected=$1 rc=0
  shift
  "$worker" "$@" >"$work/out" 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "$* exited $rc, expected 2: $(cat "$work/out")"
  grep -q -- "$expected" "$work/out" || fail "$*: no \"$expected\" in: $(cat "$work/out")"
  echo "ok: $* -> $(head -1 "$work/out")"
}
expect_usage_error "--coordinator is required"
expect_usage_error "unknown backend \"tpu\" (expected cpu, cuda, cuda:N or auto)" --coordinator 127.0.0.1:1 --backend tpu
expect_usage_error "cannot read --join-token-file" --coordinator 127.0.0.1:1 \
  --join-token-file "$work/missing"
expect_usage_error "no PEM certificate" --coordinator 127.0.0.1:1 --tls-ca "$work/missing"
expect_usage_error "is not a memory size" --coordinator 127.0.0.1:1 --memory-limit lots
expect_usage_error "is more than this machine's memory" --coordinator 127.0.0.1:1 \
  --memory-limit 1000TiB

# Runs the agent against a coordinator that is not there, reads its
# announced metrics port, scrapes it, stops it with `signal`.
run_and_stop() {  # signal
  local signal=$1 log="$work/agent-$1.log"
  "$worker" --coordinator 127.0.0.1:1 --metrics-listen 127.0.0.1:0 2>"$log" &
  local pid=$! port=""
  for _ in $(seq 100); do
    port=$(sed -n 's/^mixtrain-worker: metrics on port \([0-9]*\),.*/\1/p' "$log")
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || fail "no metrics port announced: $(cat "$log")"
  python3 - "$port" <<'PY' || fail "metrics on port $port"
import sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10).read().decode()
for line in ("mixtrain_worker_up 1", "mixtrain_worker_busy 0", "mixtrain_worker_connected 0"):
    assert line in text, (line, text)
PY
  sleep 1  # it keeps retrying instead of exiting
  kill -0 "$pid" || fail "the agent exited without a coordinator: $(cat "$log")"
  kill "-$signal" "$pid"
  local rc=0
  wait "$pid" || rc=$?
  [ "$rc" = 0 ] || fail "SIG$signal: exit $rc: $(cat "$log")"
  grep -q "cannot register with 127.0.0.1:1" "$log" || fail "no retry line: $(cat "$log")"
  grep -q "stopping" "$log" || fail "no stop line: $(cat "$log")"
  echo "ok: SIG$signal stops it with exit 0"
}
run_and_stop TERM
run_and_stop INT
echo "worker_agent: all passed"
