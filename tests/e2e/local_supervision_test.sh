#!/usr/bin/env bash
# Why: `mixtrain local` must never leave processes or secrets behind. This
# checks its supervision with the real coordinator and a stand-in worker
# (a process that only waits, so no job ever runs): the spec is checked
# before anything starts, Ctrl-C stops every process and removes the state
# directory, a worker that dies ends the run with exit 1 naming its log and
# keeping the state directory, and the tokens are 0600 files.
# Training through `local` is `make demo` (and service_cluster covers the
# real workers).
#   local_supervision_test.sh MIXTRAIN_BINARY COORDINATOR_BINARY SOURCE_DIR
set -euo pipefail
mixtrain=$1
coordinator_bin=$2
source_dir=$3
work=$(mktemp -d)
cleanup() {
  for f in "$work"/pids/*; do
    if [ -e "$f" ]; then kill -9 "$(cat "$f")" 2>/dev/null || true; fi
  done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$work"/out "$work"/err >&2 2>/dev/null || true; exit 1; }

# bin/: mixtrain, the coordinator behind a wrapper that records its pid (and
# keeps only the flags its --help lists), and the stand-in worker.
mkdir -p "$work/bin" "$work/pids" "$work/tmp"
cp "$mixtrain" "$work/bin/mixtrain"
cat >"$work/bin/mixtrain-coordinator" <<SH
#!/usr/bin/env bash
echo \$\$ >"$work/pids/coordinator"
echo "args: \$*" >&2
known=\$("$coordinator_bin" --help 2>&1)
args=()
while [ \$# -gt 0 ]; do
  if grep -q -- "\$1" <<<"\$known"; then args+=("\$1" "\$2"); fi
  shift 2
done
exec "$coordinator_bin" "\${args[@]}"
SH
cat >"$work/bin/mixtrain-worker" <<SH
#!/usr/bin/env bash
echo \$\$ >"$work/pids/worker-\$\$"
echo "args: \$*" >&2
exec sleep 600
SH
chmod +x "$work/bin/"*
export TMPDIR=$work/tmp
spec=$source_dir/examples/demo.yaml

# Starts `mixtrain local` in the background and waits until it submitted.
start_local() {
  "$work/bin/mixtrain" local "$spec" "$@" >"$work/out" 2>"$work/err" &
  local_pid=$!
  for _ in $(seq 200); do grep -q "^submitted" "$work/out" 2>/dev/null && return 0; sleep 0.1; done
  fail "mixtrain local did not submit"
}
# Every recorded process has ended.
all_stopped() {
  for f in "$work"/pids/*; do
    if kill -0 "$(cat "$f")" 2>/dev/null; then return 1; fi
  done
}

# Checked before anything starts: exit 2, no state directory.
set +e
"$work/bin/mixtrain" local "$spec" --workers 1 >"$work/out" 2>"$work/err"
code=$?
set -e
[ "$code" -eq 2 ] || fail "--workers 1 for a 2-worker spec: exit $code, want 2"
grep -q "resources.workers" "$work/err" || fail "--workers 1: resources.workers not named"
printf 'name: x\n' >"$work/bad.yaml"
set +e
"$work/bin/mixtrain" local "$work/bad.yaml" >"$work/out" 2>"$work/err"
code=$?
set -e
[ "$code" -eq 2 ] || fail "invalid spec: exit $code, want 2"
grep -q "data.train" "$work/err" || fail "invalid spec: data.train not named"
[ -z "$(ls "$work/tmp")" ] || fail "a refused spec left a state directory"

# Ctrl-C: every process stopped, the state directory removed, exit 1.
start_local
state=$(sed -n 's/.*state in \(.*\)$/\1/p' "$work/out")
[ -d "$state" ] || fail "no state directory printed"
[ "$(stat -c %a "$state/auth-token")" = 600 ] || fail "auth-token is not 0600"
[ "$(stat -c %a "$state/join-token")" = 600 ] || fail "join-token is not 0600"
grep -q -- "--listen 127.0.0.1:0 --http 127.0.0.1:0" "$state/coordinator.log" \
  || fail "coordinator flags: $(cat "$state/coordinator.log")"
grep -q -- "--data-root $source_dir/examples" "$state/coordinator.log" || fail "--data-root is not the spec's directory"
grep -q -- "--join-token-file $state/join-token --metrics-listen 127.0.0.1:0" "$state/worker-1.log" \
  || fail "worker flags: $(cat "$state/worker-1.log")"
[ "$(ls "$work/pids" | grep -c worker)" -eq 2 ] || fail "not 2 workers started"
kill -INT "$local_pid"
set +e
wait "$local_pid"
code=$?
set -e
[ "$code" -eq 1 ] || fail "interrupted local: exit $code, want 1"
all_stopped || fail "processes left running after Ctrl-C"
[ ! -e "$state" ] || fail "the state directory survived Ctrl-C"

# A worker dies: exit 1 naming it and its log, the state directory kept.
rm -f "$work"/pids/*
start_local
worker_pid=$(cat "$(ls "$work"/pids/worker-* | head -1)")
kill "$worker_pid"
set +e
wait "$local_pid"
code=$?
set -e
[ "$code" -eq 1 ] || fail "a dead worker: exit $code, want 1"
grep -q "worker [12] was killed by signal 15 (log: .*worker-[12].log)" "$work/err" || fail "dead worker not named"
grep -q "kept " "$work/err" || fail "the kept state directory is not named"
all_stopped || fail "processes left running after a worker died"
echo "local supervision: all checks passed"
