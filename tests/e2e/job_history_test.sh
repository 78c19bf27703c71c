#!/usr/bin/env bash
# Why: a history of 200,000 jobs once made `mixtrain jobs` fail for good,
# and finished jobs and their logs piled up forever (issue 29). This drives
# the real `mixtrain` against a real `mixtrain-coordinator`: `jobs` lists
# the 50 most recent jobs and says there are more, `jobs --all` follows
# every ListJobs page; a coordinator started with --retain-finished-jobs
# and --retain-finished-days deletes the finished jobs (and their logs)
# it no longer keeps, and never a queued one.
#   job_history_test.sh BIN_DIR
set -euo pipefail
source "$(dirname "$0")/cluster_lib.sh" "$1"

stop_coordinator() {
  kill "$COORD_PID"
  wait "$COORD_PID" 2>/dev/null || true
}
count_jobs() { $PY -c "import json,sys; print(len(json.load(sys.stdin)))"; }

cat >"$WORK/data/job.yaml" <<'YAML'
name: history
data: {train: builtin:demo}
train: {steps: 10, warmup_steps: 2}
YAML

start_coordinator
ids=()
for i in $(seq 55); do
  ids+=("$(submit "$WORK/data/job.yaml")")
done

# --- jobs: the 50 most recent, oldest first; --all: every page -------------
mixtrain jobs >"$WORK/recent.txt" 2>"$WORK/recent.err"
[ "$(grep -c ' QUEUED ' "$WORK/recent.txt")" -eq 50 ] || fail "jobs listed $(grep -c ' QUEUED ' "$WORK/recent.txt") jobs, want 50"
grep -q "^${ids[5]} " "$WORK/recent.txt" || fail "jobs does not start at the 50th newest job"
grep -q "^${ids[4]} " "$WORK/recent.txt" && fail "jobs lists the 51st newest job"
tail -1 "$WORK/recent.txt" | grep -q "^${ids[54]} " || fail "jobs does not end with the newest job"
grep -q -- "--all" "$WORK/recent.err" || fail "jobs does not say there are more: $(cat "$WORK/recent.err")"
[ "$(mixtrain -o json jobs --all | count_jobs)" -eq 55 ] || fail "jobs --all does not list 55 jobs"
mixtrain -o json jobs --all | $PY -c "
import json, sys
ids = [job['id'] for job in json.load(sys.stdin)]
assert ids == sys.argv[1:], 'jobs --all is not every job oldest first'
" "${ids[@]}" || fail "jobs --all order"
mixtrain jobs --help | grep -q "50 most recent" || fail "jobs --help does not say how many it lists"

# --- retention: a count limit, then an age limit ----------------------------
for i in $(seq 0 9); do mixtrain cancel "${ids[$i]}" >/dev/null; done
stop_coordinator
start_coordinator --retain-finished-jobs 4
wait_for '[ "$(mixtrain -o json jobs --all | count_jobs)" -eq 49 ]' 20 \
  "4 of the 10 cancelled jobs and the 45 queued ones to stay"
mixtrain status "${ids[5]}" >/dev/null 2>&1 && fail "an old cancelled job is still there"
mixtrain status "${ids[6]}" | grep -q CANCELLED || fail "the newest cancelled jobs should stay"
set +e
mixtrain logs "${ids[0]}" >/dev/null 2>"$WORK/logs.err"
code=$?
set -e
[ "$code" -eq 2 ] || fail "the log of a deleted job: exit $code, want 2"
stop_coordinator
# Everything finished and queued long ago: the finished ones go, the queued stay.
$PY -c "
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute('UPDATE jobs SET updated_ms = 1000, created_ms = 1000')
db.commit()
" "$WORK/state.db"
start_coordinator --retain-finished-days 30 --retain-finished-jobs 0
wait_for '[ "$(mixtrain -o json jobs --all | count_jobs)" -eq 45 ]' 20 "the cancelled jobs to go"
mixtrain -o json jobs --all | $PY -c "
import json, sys
jobs = json.load(sys.stdin)
assert len(jobs) == 45 and all(job['state'] == 'QUEUED' for job in jobs), jobs
" || fail "after 30 days only the 45 queued jobs should stay"
"$BIN/mixtrain-coordinator" --help | grep -q -- "--retain-finished-days" || fail "--help lacks --retain-finished-days"
echo "job history: OK"
