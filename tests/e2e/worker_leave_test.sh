#!/usr/bin/env bash
# Why: under docker-compose a scaled-down worker (SIGTERM) stayed LOST and
# a restarted one came back under a new id beside its LOST entry, so
# MixtrainWorkerLost fired forever (issue 30). With the real coordinator,
# agents and CLI: a worker stopped with SIGTERM deregisters and is gone at
# once (no lost worker in /metrics); a worker killed outright is LOST until
# an agent restarted on the same host and metrics port replaces it; and a
# LOST worker nobody replaces is forgotten after
# --lost-worker-retention-seconds.
#   worker_leave_test.sh BIN_DIR
set -euo pipefail
source "$(dirname "$0")/cluster_lib.sh" "$1"

# The state of each listed worker, by id: "w-1=IDLE w-2=LOST".
worker_states() {
  mixtrain -o json workers |
    $PY -c "import json,sys; print(' '.join(w['id']+'='+w['state'] for w in json.load(sys.stdin)))"
}
lost_metric() {
  $PY -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$HTTP_PORT/metrics', timeout=10).read().decode())" |
    sed -n 's/^mixtrain_workers{state="lost"} //p'
}

WORKER_TIMEOUT=1 start_coordinator --lost-worker-retention-seconds 4
start_worker leaving
start_worker crashing
start_worker forgotten
wait_for "[ \"\$(worker_states | grep -o IDLE | wc -l)\" = 3 ]" 20 "three idle workers"

# 1. SIGTERM: it deregisters; nothing is lost.
kill -TERM "${WORKER_PID[leaving]}"
wait "${WORKER_PID[leaving]}" || fail "the SIGTERMed worker exited $?"
grep -q "deregistered ${WORKER_ID[leaving]}" "$WORK/worker-leaving.log" ||
  fail "the worker did not say it deregistered"
worker_states | grep -q "${WORKER_ID[leaving]}" && fail "a deregistered worker is still listed"
[ "$(lost_metric)" = 0 ] || fail "a deregistered worker counts as lost: $(lost_metric)"
echo "ok: a worker stopped with SIGTERM leaves no entry"

# 2. Killed outright: LOST, then replaced by the same agent restarted on
#    the same host and metrics port.
port=${WORKER_METRICS[crashing]}
old_id=${WORKER_ID[crashing]}
kill -9 "${WORKER_PID[crashing]}"
wait "${WORKER_PID[crashing]}" 2>/dev/null || true
wait_for "worker_states | grep -q '$old_id=LOST'" 20 "the killed worker to be LOST"
METRICS_PORT=$port start_worker crashing
[ "${WORKER_ID[crashing]}" != "$old_id" ] || fail "the restarted agent kept its old id"
worker_states | grep -q "$old_id" && fail "the restarted agent's LOST entry is still listed"
echo "ok: an agent restarted in place replaces its LOST entry"

# 3. Killed and never back: forgotten after the retention.
kill -9 "${WORKER_PID[forgotten]}"
wait "${WORKER_PID[forgotten]}" 2>/dev/null || true
wait_for "[ \"\$(lost_metric)\" = 1 ]" 20 "the killed worker to count as lost"
wait_for "[ \"\$(lost_metric)\" = 0 ]" 20 "the lost worker to be forgotten"
worker_states | grep -q "${WORKER_ID[forgotten]}" && fail "a forgotten worker is still listed"
echo "worker_leave: all passed"
