#!/usr/bin/env bash
# Why: issue 17's priorities with preemption, through the real service. A
# low-priority 2-rank job runs on the only two workers; a high-priority
# 2-rank job submitted with --priority preempts it: the low one's ranks
# checkpoint the step they agree on and stop (PREEMPTED), it requeues
# without spending a restart, the high one runs and finishes first, and
# the low one resumes from that checkpoint and ends with final weights
# byte-identical to an uninterrupted run. `jobs` shows the priorities,
# the events the preemption, /metrics counts it.
#   service_preemption_test.sh BIN_DIR
set -euo pipefail
source "$(dirname "$0")/cluster_lib.sh" "$1"

STEPS=200 DIM=128 SEQ=64 BATCH=8 write_spec "$WORK/data/low.yaml" low
STEPS=40 DIM=128 SEQ=64 BATCH=8 write_spec "$WORK/data/high.yaml" high
reference reference "$WORK/data/low.yaml" 2  # without any service

start_coordinator
start_worker a
start_worker b

low=$(submit "$WORK/data/low.yaml")
wait_state "$low" RUNNING 30
# Past its first periodic checkpoint (step 20), so that resuming from the
# preemption's own checkpoint, not that one, is what makes it exact.
wait_for "[ \"\$(job_field $low \"j['step']\")\" -ge 25 ]" 180 "job $low to pass step 25"
high=$(mixtrain -o json submit --priority 5 "$WORK/data/high.yaml" |
  $PY -c "import json,sys; print(json.load(sys.stdin)['id'])")
wait_state "$high" RUNNING 120
[ "$(job_field "$low" "j['state']")" = QUEUED ] || fail "job $low is not QUEUED while $high runs"
mixtrain jobs >"$WORK/jobs.txt"
grep -qE "^$high +high +RUNNING +5 " "$WORK/jobs.txt" || fail "jobs does not show priority 5:
$(cat "$WORK/jobs.txt")"
wait_state "$high" SUCCEEDED 300
[ "$(job_field "$low" "j['state']")" != SUCCEEDED ] || fail "job $low finished before $high"
wait_state "$low" SUCCEEDED 400
same_weights "$low" reference

mixtrain -o json status "$low" >"$WORK/low.json"
$PY - "$WORK/low.json" "$high" <<'PYCHECK' || fail "the preempted job's history"
import json, sys
job = json.load(open(sys.argv[1]))
states = [e["state"] for e in job["events"]]
assert states == ["QUEUED", "RUNNING", "PREEMPTED", "QUEUED", "RUNNING", "SUCCEEDED"], states
assert job["restarts"] == 0 and job["attempt"] == 2, (job["restarts"], job["attempt"])
preempted = job["events"][2]["message"]
requeued = job["events"][3]["message"]
assert f"preempted for job {sys.argv[2]} (priority 5)" in preempted, preempted
assert "checkpointed step" in requeued and "resumes from there" in requeued, requeued
print(f"preemption: {preempted!r} -> {requeued!r}")
PYCHECK
metrics=$(curl -sf "http://127.0.0.1:$HTTP_PORT/metrics") || fail "coordinator /metrics"
grep -q '^mixtrain_job_preemptions_total 1' <<<"$metrics" || fail "/metrics does not count it:
$(grep preempt <<<"$metrics")"
echo "service_preemption: all checks passed"
