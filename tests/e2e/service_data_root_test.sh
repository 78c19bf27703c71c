#!/usr/bin/env bash
# Why: issue 13 item 11. The coordinator checks a job's data paths against
# --data-root at submit, but the files are opened later, on a worker (by
# each attempt's own process): a data file, or a directory on its path,
# replaced by a symlink to somewhere outside the root after the submit must
# fail the job with a message naming the path and the data root, and the
# outside file must never be trained on. A control job whose file stays a plain file
# inside the root trains, so the refusal is the symlink's doing.
#   service_data_root_test.sh BIN_DIR
set -euo pipefail
source "$(dirname "$0")/cluster_lib.sh" "$1"

# Corpora inside the data root, and the one outside it they are swapped for.
mkdir -p "$WORK/data/corpus" "$WORK/data/swapped_dir" "$WORK/outside"
$PY - "$WORK" <<'EOF'
import pathlib, sys
work = pathlib.Path(sys.argv[1])
inside = b"inside the data root: the quick brown fox jumps over the lazy dog. " * 60
for name in ("corpus/train.txt", "swapped_file.txt", "swapped_dir/train.txt"):
    (work / "data" / name).write_bytes(inside)
(work / "outside" / "train.txt").write_bytes(b"OUTSIDE SECRET " * 300)
EOF

# job_spec FILE NAME TRAIN_PATH: a tiny 1-worker job reading TRAIN_PATH.
job_spec() {
  cat >"$1" <<SPEC
version: 1
name: $2
model: {arch: gpt, layers: 1, heads: 2, dim: 32, seq_len: 32, vocab: 256}
data: {train: $3, val_fraction: 0.1, format: text}
train: {steps: 4, micro_batch: 2, grad_accum: 1, lr: 1.0e-3, min_lr: 1.0e-4,
        warmup_steps: 0, seed: 7, eval_every: 4, eval_batches: 1}
precision: {compute: bf16}
resources: {workers: 1, backend: cpu}
checkpoint: {every: 4, keep: 1}
retries: {max_restarts: 0}
SPEC
}
job_spec "$WORK/control.yaml" control corpus/train.txt
job_spec "$WORK/file.yaml" swapped-file swapped_file.txt
job_spec "$WORK/dir.yaml" swapped-dir swapped_dir/train.txt

# Submitted while no worker runs, so every path passes the submit check
# and no attempt has opened anything yet; then the swaps.
start_coordinator
control=$(submit "$WORK/control.yaml")
file_job=$(submit "$WORK/file.yaml")
dir_job=$(submit "$WORK/dir.yaml")
ln -sfn "$WORK/outside/train.txt" "$WORK/data/swapped_file.txt"  # the file itself
rm -rf "$WORK/data/swapped_dir"
ln -s ../outside "$WORK/data/swapped_dir"  # a directory on the way, relative

start_worker a
ends_as "$control" SUCCEEDED 120
echo "control job $control trained on its file inside the data root"
for id in "$file_job" "$dir_job"; do
  ends_as "$id" FAILED 120
  mixtrain logs "$id" >"$WORK/$id.log" 2>&1 || true
  grep -q "escapes the data root $WORK/data" "$WORK/$id.log" ||
    fail "job $id: no message that its data file escapes the data root"
  if grep -q "step 1/" "$WORK/$id.log"; then fail "job $id trained on the file outside the root"; fi
  if ls "$WORK/checkpoints/$id" 2>/dev/null | grep -q '^step_'; then
    fail "job $id wrote a checkpoint"
  fi
  echo "job $id refused: $(grep -m1 -o "'.*escapes the data root.*" "$WORK/$id.log")"
done
echo "service_data_root: all checks passed"
