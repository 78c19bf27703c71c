#!/usr/bin/env bash
# Why: issue 29 item 18: ranks killed in the middle of a checkpoint left
# their temporary directory (step_N.tmp-*) behind after a cancel, for
# ever. A 2-rank job that checkpoints every step is frozen while a
# temporary directory is there, then cancelled (its frozen ranks end by
# SIGKILL after the grace): once the job is CANCELLED and its ranks gone,
# no temporary directory may remain, and its complete checkpoints stay.
#   service_cancel_checkpoint_test.sh BIN_DIR
set -euo pipefail
source "$(dirname "$0")/cluster_lib.sh" "$1"

cat >"$WORK/data/job.yaml" <<'SPEC'
version: 1
name: cancel-mid-checkpoint
model: {arch: gpt, layers: 4, heads: 4, dim: 128, seq_len: 32, vocab: 256}
data: {train: "builtin:demo", val_fraction: 0.1, format: text}
train: {steps: 100000, micro_batch: 2, grad_accum: 1, lr: 1.0e-3, warmup_steps: 10, seed: 7,
        eval_every: 100000, eval_batches: 1}
precision: {compute: bf16}
zero: {stage: 2}
resources: {workers: 2, backend: cpu}
checkpoint: {every: 1, keep: 2}
SPEC

start_coordinator
start_worker a
start_worker b
id=$(submit "$WORK/data/job.yaml")
dir="$WORK/checkpoints/$id"
temporaries() { ls "$dir" 2>/dev/null | grep -E '^step_[0-9]+\.tmp-' || true; }
complete() { ls "$dir" 2>/dev/null | grep -cE '^step_[0-9]+$' || true; }
wait_for "[ \"\$(complete)\" -ge 1 ]" 120 "job $id to write a checkpoint"

# Freeze both ranks while a checkpoint is being built (retrying until the
# freeze lands inside one).
ranks=()
for try in $(seq 1 400); do
  ranks=()
  for name in a b; do ranks+=($(pgrep -P "${WORKER_PID[$name]}" || true)); done
  [ "${#ranks[@]}" -eq 2 ] || fail "job $id: expected 2 training processes, found ${#ranks[@]}"
  if [ -n "$(temporaries)" ]; then
    kill -STOP "${ranks[@]}"
    [ -n "$(temporaries)" ] && break
    kill -CONT "${ranks[@]}"
  fi
  sleep 0.01
done
left=$(temporaries)
[ -n "$left" ] || fail "never caught job $id in the middle of a checkpoint"
kept=$(complete)
echo "froze job $id while building: $left ($kept complete checkpoints)"

mixtrain cancel "$id" >/dev/null
wait_state "$id" CANCELLED 30
for pid in "${ranks[@]}"; do wait_for "! alive $pid" 30 "rank process $pid to end"; done
wait_for "[ -z \"\$(temporaries)\" ]" 30 "the cancelled job's temporaries ($left) to be removed"
[ "$(complete)" -eq "$kept" ] || fail "complete checkpoints went from $kept to $(complete)"
for name in a b; do
  grep -q 'unfinished checkpoint stays' "$WORK/worker-$name.log" &&
    fail "worker $name could not remove a temporary"
done
echo "PASS: no temporary left after cancelling job $id mid-checkpoint; $kept checkpoints kept"
