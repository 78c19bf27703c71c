#!/usr/bin/env bash
# Why: `mixtrain train` is what users run; this drives the real binary the
# way they do: a tiny job trains and leaves a §5 summary and a checkpoint,
# the summary says succeeded with the steps asked for (and counts the
# built-in corpus as host data), a killed earlier run's unfinished
# checkpoint is removed, a resume continues
# from the checkpoint (also past damaged newest ones), a second run into a
# directory holding a run's checkpoints is refused before any work,
# `mixtrain export` writes a safetensors file (and refuses a missing
# checkpoint or an unknown format), `auto` keys are chosen and said, and a
# bad spec or a bad override exits 2 with the key named and nothing
# written.
#   train_cli_test.sh MIXTRAIN_BINARY SOURCE_DIR
set -euo pipefail
mixtrain=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

tiny=(--set model.layers=2 --set model.heads=2 --set model.dim=32 --set model.seq_len=32
      --set train.micro_batch=4 --set train.warmup_steps=2 --set train.eval_every=4
      --set train.eval_batches=2 --set resources.workers=1 --set checkpoint.every=4
      --set "checkpoint.dir=$work/ckpt")

# What an earlier run killed mid-checkpoint left (issue 29): removed.
mkdir -p "$work/ckpt/step_00000099.tmp-epoch-0"
"$mixtrain" train "$source_dir/examples/demo.yaml" "${tiny[@]}" --set train.steps=8 \
  --summary-json "$work/summary.json" >"$work/out.txt" 2>&1 || { cat "$work/out.txt"; fail "train exited $?"; }
grep -q '"status": "succeeded"' "$work/summary.json" || fail "summary does not say succeeded"
grep -q '"steps": 8' "$work/summary.json" || fail "summary does not count 8 steps"
for key in name status steps skipped_steps world_size zero_stage compute_dtype param_count \
    tokens_per_second final_train_loss final_val_loss loss_scale nonfinite_events ranks \
    memory_bytes comm_elements_per_step comm_bytes_per_step; do
  grep -q "\"$key\"" "$work/summary.json" || fail "summary lacks \"$key\""
done
grep -q "step 8/8" "$work/out.txt" || fail "no progress line for step 8"
grep -q "val loss" "$work/out.txt" || fail "no eval line"
ls "$work/ckpt" | grep -q "step_" || fail "no checkpoint written"
[ ! -e "$work/ckpt/step_00000099.tmp-epoch-0" ] || fail "a killed run's temporary was left"
grep -q '"data": 307321' "$work/summary.json" || fail "summary lacks the host's data (builtin:demo, 307321 bytes)"

# Sample from the run: the prompt comes back, followed by generated text.
"$mixtrain" sample "$work/ckpt" --prompt "chapter" --tokens 40 >"$work/sample.txt" 2>&1 \
  || { cat "$work/sample.txt"; fail "sample exited $?"; }
grep -q "^chapter" "$work/sample.txt" || fail "sample does not start with its prompt"
[ "$(wc -c <"$work/sample.txt")" -ge 47 ] || fail "sample is shorter than prompt + 40 tokens"
set +e
"$mixtrain" sample "$work/no-such-dir" >"$work/nosample.txt" 2>&1
code=$?
set -e
[ "$code" -eq 2 ] || fail "sample of a missing checkpoint: exit $code, want 2"

# Export the run as a Hugging Face safetensors file; refuse a missing
# checkpoint and an unknown format with exit 2.
"$mixtrain" export "$work/ckpt" --format safetensors -O "$work/model.safetensors" --dtype bf16 \
  >"$work/export.txt" 2>&1 || { cat "$work/export.txt"; fail "export exited $?"; }
[ -s "$work/model.safetensors" ] || fail "export wrote no file"
grep -q "transformer.h.1.mlp.c_proj.weight" "$work/model.safetensors" \
  || fail "exported file lacks the HF name transformer.h.1.mlp.c_proj.weight"
set +e
"$mixtrain" export "$work/no-such-dir" -O "$work/none.safetensors" >"$work/noexport.txt" 2>&1
code=$?
"$mixtrain" export "$work/ckpt" --format onnx -O "$work/onnx.safetensors" >"$work/onnx.txt" 2>&1
onnx_code=$?
set -e
[ "$code" -eq 2 ] || fail "export of a missing checkpoint: exit $code, want 2"
[ "$onnx_code" -eq 2 ] || fail "export --format onnx: exit $onnx_code, want 2"
grep -q "onnx" "$work/onnx.txt" || fail "export --format onnx: format not named"

# Training again into a directory holding a run's checkpoints would end in
# "already exists" after all the work: refused at the start instead (exit
# 2, --resume named, nothing written), without --resume and with a resume
# from an older checkpoint than the directory holds.
before=$(ls -lR --time-style=full-iso "$work/ckpt")
set +e
"$mixtrain" train "$source_dir/examples/demo.yaml" "${tiny[@]}" --set train.steps=8 \
  --summary-json "$work/again.json" >"$work/again.txt" 2>&1
again_code=$?
"$mixtrain" train "$source_dir/examples/demo.yaml" "${tiny[@]}" --set train.steps=12 \
  --resume "$work/ckpt/step_00000004" --summary-json "$work/behind.json" >"$work/behind.txt" 2>&1
behind_code=$?
set -e
cat "$work/again.txt" "$work/behind.txt"
[ "$again_code" -eq 2 ] || fail "a second run into the same checkpoint.dir: exit $again_code, want 2"
grep -q "already holds the checkpoints of a run (newest: step_00000008); continue that run with \
--resume $work/ckpt" "$work/again.txt" || fail "a second run: --resume not named"
[ "$behind_code" -eq 2 ] || fail "a resume behind the newest checkpoint: exit $behind_code, want 2"
grep -q "already holds step_00000008, past step 4 where this run resumes" "$work/behind.txt" \
  || fail "a resume behind the newest checkpoint: step_00000008 not named"
grep -q "step 1/" "$work/again.txt" "$work/behind.txt" && fail "a refused run trained"
[ ! -e "$work/again.json" ] && [ ! -e "$work/behind.json" ] || fail "a refused run wrote its summary"
[ "$(ls -lR --time-style=full-iso "$work/ckpt")" = "$before" ] || fail "a refused run changed $work/ckpt"

# Resume from the checkpoint directory and train 4 more steps.
"$mixtrain" train "$source_dir/examples/demo.yaml" "${tiny[@]}" --set train.steps=12 \
  --resume "$work/ckpt" --summary-json "$work/resumed.json" >"$work/resumed.txt" 2>&1 \
  || { cat "$work/resumed.txt"; fail "resume exited $?"; }
grep -q '"steps": 12' "$work/resumed.json" || fail "resumed run does not end at step 12"
grep -q "step 1/12" "$work/resumed.txt" && fail "resumed run started again from step 1"

# A truncated newest checkpoint: the resume passes over it, and when the
# run comes back to its step it writes that step again, keeping the
# damaged directory aside for inspection (not failing as "already exists").
truncate -s -4 "$work/ckpt/step_00000012/shard-00000-of-00001.safetensors"
"$mixtrain" train "$source_dir/examples/demo.yaml" "${tiny[@]}" --set train.steps=16 \
  --resume "$work/ckpt" --summary-json "$work/past_damage.json" >"$work/past_damage.txt" 2>&1 \
  || { code=$?; cat "$work/past_damage.txt"; fail "resume past a truncated checkpoint: exit $code"; }
grep -q '"steps": 16' "$work/past_damage.json" || fail "resume past damage does not end at step 16"
[ -d "$work/ckpt/step_00000012.damaged-1" ] || fail "the damaged step 12 was not kept aside"
[ -f "$work/ckpt/step_00000012/manifest.json" ] || fail "step 12 was not written again"

# A bit flipped in the newest checkpoint (its sizes still match): the
# resume says it passes over it and why, and from which checkpoint it goes on.
python3 - "$work/ckpt/step_00000016/shard-00000-of-00001.safetensors" <<'EOF'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(-100, 2)
    byte = f.read(1)[0]
    f.seek(-1, 1)
    f.write(bytes([byte ^ 0x10]))
EOF
"$mixtrain" train "$source_dir/examples/demo.yaml" "${tiny[@]}" --set train.steps=20 \
  --resume "$work/ckpt" --summary-json "$work/past_flip.json" >"$work/past_flip.txt" 2>&1 \
  || { code=$?; cat "$work/past_flip.txt"; fail "resume past a flipped bit exited $code"; }
grep -q '"steps": 20' "$work/past_flip.json" || fail "resume past a flipped bit does not end at step 20"
grep -q "resume: passing over checkpoint $work/ckpt/step_00000016: .*CRC32C" "$work/past_flip.txt" \
  || fail "the resume did not say it passed over step 16 and why"
grep -q "resume: resuming from checkpoint $work/ckpt/step_00000012 (step 12)" "$work/past_flip.txt" \
  || fail "the resume did not say it went on from step 12"

# `auto` keys are chosen for this machine before the run, said, and run
# with: the summary's stage is the one chosen.
"$mixtrain" train "$source_dir/examples/demo.yaml" "${tiny[@]}" --set train.steps=4 \
  --set zero.stage=auto --set train.activation_checkpointing=auto \
  --set "checkpoint.dir=$work/auto-ckpt" --summary-json "$work/auto.json" >"$work/auto.txt" 2>&1 \
  || { code=$?; cat "$work/auto.txt"; fail "an auto run exited $code"; }
chosen=$(sed -n 's/^auto chose zero.stage \([0-3]\), train.activation_checkpointing [a-z]* (fits .* per rank)$/\1/p' "$work/auto.txt")
[ -n "$chosen" ] || fail "an auto run did not say what it chose: $(cat "$work/auto.txt")"
grep -q "\"zero_stage\": $chosen," "$work/auto.json" || fail "the auto run did not run stage $chosen"

# Bad input: exit 2, the problem named, no summary written.
set +e
"$mixtrain" train "$source_dir/examples/demo.yaml" --set model.heads=5 \
  --summary-json "$work/bad.json" >"$work/bad.txt" 2>&1
code=$?
set -e
[ "$code" -eq 2 ] || fail "impossible value: exit $code, want 2"
grep -q "model.heads" "$work/bad.txt" || fail "impossible value: key not named"
[ ! -e "$work/bad.json" ] || fail "a summary was written for a rejected spec"
set +e
"$mixtrain" train "$work/missing.yaml" >"$work/missing.txt" 2>&1
code=$?
set -e
[ "$code" -eq 2 ] || fail "missing spec file: exit $code, want 2"
echo "train CLI: all checks passed"
