#!/usr/bin/env bash
# Why: issue 5's promise that losing a process costs time, not results.
# One 2-rank job spec runs uninterrupted under `mixtrain train --nproc 2`
# as the reference; then on a coordinator with three workers it runs three
# times, losing in turn one rank's training process (SIGKILL), one whole
# worker agent (SIGKILL; noticed by the missing heartbeats) and the
# coordinator itself (SIGKILL, then restarted on the same database and
# port). Each job must finish SUCCEEDED with final weights byte-identical
# to the reference (resume is exact), the first two on a second attempt
# that resumed from a checkpoint, and the coordinator's history must hold
# every job exactly once.
#   service_recovery_test.sh BIN_DIR
set -euo pipefail
source "$(dirname "$0")/cluster_lib.sh" "$1"
# A coordinator restart (kill, 1 s, start, reconnect) must stay well inside
# the worker timeout, or the ranks fence themselves (worker/agent.h).
WORKER_TIMEOUT=6

STEPS=300 DIM=128 SEQ=64 BATCH=8 write_spec "$WORK/data/job.yaml" recovery
reference reference "$WORK/data/job.yaml" 2  # without any service

start_coordinator
start_worker a
start_worker b
start_worker c

# A job started, past its first checkpoint (step 20): prints the id.
running_past_checkpoint() {
  local id
  id=$(submit "$WORK/data/job.yaml")
  wait_state "$id" RUNNING 30
  wait_for "[ \"\$(job_field $id \"j['step']\")\" -ge 30 ]" 120 "job $id to pass step 30"
  echo "$id"
}

# rank_worker ID RANK: the name of the worker running that rank of the job.
rank_worker() { worker_named "$(job_field "$1" "j['workers'][$2]")"; }

# --- one rank's training process dies ---------------------------------------
id=$(running_past_checkpoint)
victim=$(rank_worker "$id" 1)
child=$(pgrep -P "${WORKER_PID[$victim]}" | head -1)
[ -n "$child" ] || fail "worker $victim runs no training process"
kill -9 "$child"
wait_state "$id" SUCCEEDED 300
[ "$(job_field "$id" "j['attempt']")" -ge 2 ] || fail "job $id did not restart"
same_weights "$id" reference
echo "training process lost: job $id restarted and matched the reference"

# --- a whole worker agent dies ------------------------------------------------
id=$(running_past_checkpoint)
victim=$(rank_worker "$id" 0)
for child in $(pgrep -P "${WORKER_PID[$victim]}"); do kill -9 "$child"; done
kill -9 "${WORKER_PID[$victim]}"
unset "WORKER_PID[$victim]"
wait_state "$id" SUCCEEDED 300
[ "$(job_field "$id" "j['attempt']")" -ge 2 ] || fail "job $id did not restart"
same_weights "$id" reference
mixtrain -o json workers | $PY -c "
import json, sys
states = {w['id']: w['state'] for w in json.load(sys.stdin)}
sys.exit(0 if states.get('${WORKER_ID[$victim]}') == 'LOST' else 1)" \
  || fail "worker $victim is not listed as LOST"
echo "worker agent lost: job $id restarted and matched the reference"

# --- the coordinator dies -------------------------------------------------------
id=$(running_past_checkpoint)
kill_coordinator
sleep 1
start_coordinator
wait_state "$id" SUCCEEDED 300
same_weights "$id" reference
mixtrain -o json jobs >"$WORK/jobs.json"
mixtrain -o json status "$id" >"$WORK/status.json"
$PY - "$WORK/jobs.json" "$WORK/status.json" <<'PYCHECK' || fail "history after the coordinator restart"
import json, sys
jobs = json.load(open(sys.argv[1]))
status = json.load(open(sys.argv[2]))
ids = [j["id"] for j in jobs]
assert len(ids) == 3 and len(set(ids)) == 3, ids
assert all(j["state"] == "SUCCEEDED" for j in jobs), jobs
assert status["attempt"] == 1, status  # continued, not restarted
states = [e["state"] for e in status.get("events", [])]
assert states == ["QUEUED", "RUNNING", "SUCCEEDED"], states
PYCHECK
echo "coordinator lost: job $id continued and matched the reference"
echo "service_recovery: all checks passed"
