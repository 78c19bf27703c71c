#!/usr/bin/env bash
# Why: issue 13 items 4 and 5 on the service: a damaged checkpoint must not
# cost a job that has a good one. A 2-rank job runs on a coordinator with
# two workers; once it has checkpoints, both ranks are frozen, the newest
# checkpoint is damaged (one bit flipped in a shard: listed, but refused by
# its CRC; or a shard truncated: not even listed) and the ranks are killed.
# The restarted attempt must pass over the damaged checkpoint, saying which
# and why, resume from the newest one that verifies, write the damaged step
# again while keeping the damaged directory aside, and finish with weights
# byte-identical to an uninterrupted `mixtrain train --nproc 2` run.
#   service_checkpoint_damage_test.sh BIN_DIR
set -euo pipefail
source "$(dirname "$0")/cluster_lib.sh" "$1"

write_spec "$WORK/data/job.yaml" damage  # 120 steps, a checkpoint every 20, keep 3
reference reference "$WORK/data/job.yaml" 2
start_coordinator
start_worker a
start_worker b

# The newest checkpoint directory of job $1 (its name), or nothing.
newest_checkpoint() {
  ls "$WORK/checkpoints/$1" 2>/dev/null | grep -E '^step_[0-9]+$' | sort | tail -1
}

# damage_and_restart ID HOW: once job ID has two checkpoints, stops its
# ranks, damages the newest checkpoint (HOW: flip or truncate), kills the
# ranks; prints the damaged checkpoint's name.
damage_and_restart() {
  local id=$1 how=$2 ranks=() name shard
  wait_for "[ \"\$(ls '$WORK/checkpoints/$id' 2>/dev/null | grep -cE '^step_[0-9]+\$')\" -ge 2 ]" \
    120 "job $id to write two checkpoints"
  for name in a b; do ranks+=($(pgrep -P "${WORKER_PID[$name]}")); done
  [ "${#ranks[@]}" -eq 2 ] || fail "job $id: expected 2 training processes, found ${#ranks[@]}"
  kill -STOP "${ranks[@]}"
  name=$(newest_checkpoint "$id")
  shard="$WORK/checkpoints/$id/$name/shard-00001-of-00002.safetensors"
  case $how in
    flip) $PY - "$shard" <<'EOF' ;;
import sys
with open(sys.argv[1], "r+b") as f:   # one bit, in the middle of the values
    f.seek(f.seek(0, 2) // 2)
    byte = f.read(1)[0]
    f.seek(-1, 1)
    f.write(bytes([byte ^ 0x01]))
EOF
    truncate) truncate -s -4 "$shard" ;;
  esac
  kill -9 "${ranks[@]}"
  echo "$name"
}

for how in flip truncate; do
  id=$(submit "$WORK/data/job.yaml")
  damaged=$(damage_and_restart "$id" "$how")
  ends_as "$id" SUCCEEDED 300
  [ "$(job_field "$id" "j['attempt']")" -ge 2 ] || fail "job $id did not restart"
  same_weights "$id" reference
  mixtrain logs "$id" >"$WORK/$id.log" 2>&1
  grep -q "resume: passing over checkpoint .*/$damaged: " "$WORK/$id.log" ||
    fail "job $id: no log line saying that $damaged was passed over and why"
  grep -q "resume: resuming from checkpoint .*/step_[0-9]* (step " "$WORK/$id.log" ||
    fail "job $id: no log line naming the checkpoint it resumed from"
  grep -q "moved the damaged checkpoint of step .* aside to .*/$damaged.damaged-1" "$WORK/$id.log" ||
    fail "job $id: no log line saying where the damaged $damaged went"
  [ -d "$WORK/checkpoints/$id/$damaged.damaged-1" ] || fail "job $id: $damaged was not kept aside"
  echo "$how: job $id passed over $damaged, $(grep -m1 -o 'resuming from checkpoint .*' "$WORK/$id.log"), and matched the reference"
done
echo "service_checkpoint_damage: all checks passed"
