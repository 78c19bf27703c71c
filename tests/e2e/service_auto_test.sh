#!/usr/bin/env bash
# Why: issue 17's `auto` keys, through the real service. A 2-rank job
# leaves zero.stage and train.activation_checkpointing to the coordinator.
# On two workers with room it starts in the cheapest configuration (no
# recompute); both are then lost, and on the two smaller workers left the
# next attempt chooses again, one that fits them (checkpointing), and
# resumes from the first attempt's checkpoint. `status` and the events
# show each choice, the summary the stage the last attempt ran, and the
# final weights equal an uninterrupted run's byte for byte (the choice
# changes memory, not arithmetic).
#   service_auto_test.sh BIN_DIR
set -euo pipefail
source "$(dirname "$0")/cluster_lib.sh" "$1"

STEPS=160 DIM=128 SEQ=128 BATCH=8 STAGE=1 write_spec "$WORK/data/fixed.yaml" auto
reference reference "$WORK/data/fixed.yaml" 2  # stage 1, no checkpointing
sed -e 's/^zero: {stage: 1}$/zero: {stage: auto}/' \
  -e 's/eval_batches: 4}$/eval_batches: 4, activation_checkpointing: auto}/' \
  "$WORK/data/fixed.yaml" >"$WORK/data/job.yaml"
grep -q "stage: auto" "$WORK/data/job.yaml" && grep -q "checkpointing: auto" "$WORK/data/job.yaml" ||
  fail "the spec did not get its auto keys"

start_coordinator
# As the coordinator plans a rank of this job (for any CPU, bf16 GEMMs
# staged in fp32, builtin:demo's 0.3 MiB held as host data), stage 1 needs
# 26.4 MiB without checkpointing, 23.6 MiB with selective and 21.6 MiB with
# blocks: the large workers hold any, the
# small ones (25 MiB) selective or blocks, and selective recomputes less.
start_worker large1 --memory-limit 64MiB
start_worker large2 --memory-limit 64MiB

id=$(submit "$WORK/data/job.yaml")
wait_state "$id" RUNNING 30
first=$(job_field "$id" "j['configuration']")
[ "$first" = "zero.stage 1, train.activation_checkpointing none" ] ||
  fail "the first attempt chose '$first', not the cheapest"
wait_for "[ \"\$(job_field $id \"j['step']\")\" -ge 30 ]" 180 "job $id to pass step 30"

start_worker small1 --memory-limit 25MiB
start_worker small2 --memory-limit 25MiB
for name in large1 large2; do
  for child in $(pgrep -P "${WORKER_PID[$name]}"); do kill -9 "$child"; done
  kill -9 "${WORKER_PID[$name]}"
  unset "WORKER_PID[$name]"
done
wait_state "$id" SUCCEEDED 400
mixtrain status "$id" >"$WORK/status.txt"
mixtrain -o json status "$id" >"$WORK/status.json"
$PY - "$WORK/status.json" "${WORKER_ID[small1]}" "${WORKER_ID[small2]}" <<'PYCHECK' ||
import json, sys
job = json.load(open(sys.argv[1]))
assert job["attempt"] == 2, job["attempt"]
assert sorted(job["workers"]) == sorted(sys.argv[2:]), job["workers"]
second = job["configuration"]
assert second == "zero.stage 1, train.activation_checkpointing selective", second
started = [e["message"] for e in job["events"] if e["state"] == "RUNNING"]
assert started[0].startswith(
    "started on 2 workers with zero.stage 1, train.activation_checkpointing none (auto)"), started
assert started[1].startswith("started on 2 workers with " + second + " (auto)"), started
assert job["summary"]["zero_stage"] == 1, job["summary"]["zero_stage"]
print(f"auto: attempt 1 {started[0]!r}, attempt 2 {second!r}")
PYCHECK
  fail "the second attempt's choice"
grep -q "^auto      zero.stage 1, train.activation_checkpointing selective$" "$WORK/status.txt" ||
  fail "status does not show the choice: $(cat "$WORK/status.txt")"
same_weights "$id" reference
echo "service_auto: all checks passed"
