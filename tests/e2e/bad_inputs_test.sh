#!/usr/bin/env bash
# Why: a user who gets a job spec, a data file, an override or a checkpoint
# wrong must learn what is wrong before any work starts (DESIGN.md §3-4).
# This drives the real `mixtrain train` with a table of such mistakes; each
# must exit 2 with its own message naming the key, line or file and the
# reason, and leave nothing behind: no summary, no checkpoint directory.
# The table is printed (case, then the message) so the log shows it.
#   bad_inputs_test.sh MIXTRAIN_BINARY
set -euo pipefail
mixtrain=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Data files: a good text corpus, and text and llm.c token files (header of
# 256 little-endian int32: magic, version, token count; then uint16 tokens)
# each wrong in one way.
python3 - "$work" <<'EOF'
import pathlib, struct, sys
work = pathlib.Path(sys.argv[1])
(work / "train.txt").write_bytes(b"the quick brown fox jumps over the lazy dog. " * 100)
(work / "empty.txt").write_bytes(b"")
(work / "short.txt").write_bytes(b"too short")
(work / "header_only.bin").write_bytes(bytes(100))
(work / "data_dir").mkdir()
def token_file(name, tokens, magic=20240520, version=1, count=None):
    header = struct.pack("<3i", magic, version, len(tokens) if count is None else count)
    body = struct.pack(f"<{len(tokens)}H", *tokens)
    (work / name).write_bytes(header.ljust(1024, b"\0") + body)
tokens = [i % 200 for i in range(2000)]
token_file("bad_magic.bin", tokens, magic=20240521)
token_file("bad_version.bin", tokens, version=2)
token_file("truncated.bin", tokens, count=4000)
token_file("big_token.bin", tokens[:1234] + [300] + tokens[1234:])
EOF

# The base spec: a tiny job that trains (line numbers matter: the cases
# below expect them). Its checkpoints would go under the run directory.
base_spec() {
  cat <<EOF
version: 1
name: bad-inputs
model:
  arch: gpt
  layers: 1
  heads: 2
  dim: 32
  seq_len: 16
  vocab: 256
data:
  train: $work/train.txt
  val_fraction: 0.1
  format: auto
train:
  steps: 2
  micro_batch: 2
  lr: 1.0e-3
  min_lr: 1.0e-4
  warmup_steps: 0
  eval_every: 1
  eval_batches: 1
precision:
  compute: bf16
  loss_scale: none
resources:
  workers: 1
  backend: cpu
checkpoint:
  every: 1
  dir: $work/run/checkpoints
EOF
}

# variant NAME SED_SCRIPT: writes the base spec edited by SED_SCRIPT to
# NAME.yaml and prints its path.
variant() {
  base_spec | sed -e "$2" >"$work/$1.yaml"
  echo "$work/$1.yaml"
}

# A good run first: the resume cases need its checkpoints, and it shows the
# base spec itself is fine.
"$mixtrain" train "$(variant good '')" --set "checkpoint.dir=$work/good" >"$work/good.txt" 2>&1 \
  || { cat "$work/good.txt"; fail "the base spec does not train"; }
"$mixtrain" export "$work/good" -O "$work/seq16.safetensors" >"$work/export.txt" 2>&1 \
  || { cat "$work/export.txt"; fail "export of the good run failed"; }
checkpoint=step_00000002
for broken in corrupt truncated; do cp -r "$work/good/$checkpoint" "$work/$broken"; done
python3 - "$work/corrupt/shard-00000-of-00001.safetensors" <<'EOF'
import sys
with open(sys.argv[1], "r+b") as f:   # flip one bit in the middle of the weights
    f.seek(f.seek(0, 2) // 2)
    byte = f.read(1)[0]
    f.seek(-1, 1)
    f.write(bytes([byte ^ 0x01]))
EOF
truncate -s -4 "$work/truncated/shard-00000-of-00001.safetensors"
mkdir "$work/no_checkpoint"

declare -A seen
cases=0
# reject NAME EXPECTED SPEC [ARGS...]: `mixtrain train SPEC ARGS` must exit 2
# with EXPECTED (paths relative to the work directory) in its message, and
# write nothing into the directory it runs in: no checkpoints, and no
# summary (--summary-json is there, unless $summary names another file).
reject() {
  local name=$1 expected=$2 spec=$3
  shift 3
  [ -z "${seen[$expected]:-}" ] || fail "$name: same expected message as ${seen[$expected]}"
  seen[$expected]=$name
  rm -rf "$work/run"
  mkdir "$work/run"
  local code=0
  (cd "$work/run" && "$mixtrain" train "$spec" "$@" --summary-json "${summary:-$work/run/summary.json}") \
    >"$work/out.txt" 2>&1 || code=$?
  local message
  message=$(sed "s|$work/||g" "$work/out.txt")
  printf '%-21s %s\n' "$name" "${message//$'\n'/$'\n                      '}"
  [ "$code" -eq 2 ] || fail "$name: exit $code, want 2"
  grep -qF -- "$expected" <<<"$message" || fail "$name: message lacks \"$expected\""
  [ -z "$(ls -A "$work/run")" ] || fail "$name: wrote $(ls -A "$work/run")"
  cases=$((cases + 1))
}

echo "case                  message"
# The job spec (YAML): unknown keys, wrong types, impossible values.
reject unknown_key "unknown_key.yaml:19: train: unknown key 'warmup_step' (did you mean 'warmup_steps'?)" \
  "$(variant unknown_key 's/warmup_steps:/warmup_step:/')"
reject unknown_section "unknown_section.yaml:22: unknown key 'precison' (did you mean 'precision'?)" \
  "$(variant unknown_section 's/^precision:/precison:/')"
reject wrong_type "wrong_type.yaml:16: train.micro_batch: expected a non-negative integer, got 'two'" \
  "$(variant wrong_type 's/micro_batch: 2/micro_batch: two/')"
reject fraction_int "fraction_int.yaml:5: model.layers: expected a non-negative integer, got 2.5" \
  "$(variant fraction_int 's/layers: 1/layers: 2.5/')"
reject section_scalar "section_scalar.yaml:25: resources: expected a map of keys (workers, backend), got 'big'" \
  "$(variant section_scalar '/^resources:/,/backend:/c\resources: big')"
reject vocab_above_uint16 "vocab_above_uint16.yaml:9: model.vocab: must be at most 65536 (token ids are stored as uint16), got 70000" \
  "$(variant vocab_above_uint16 's/vocab: 256/vocab: 70000/')"
reject model_too_big "model_too_big.yaml:7: model.dim: must be at most 65536, got 4000000000" \
  "$(variant model_too_big 's/dim: 32/dim: 4000000000/')"
reject heads_dim "heads_dim.yaml:6: model.heads: must divide model.dim (32), got 3" \
  "$(variant heads_dim 's/heads: 2/heads: 3/')"
reject micro_batch_huge "micro_batch_huge.yaml:16: train.micro_batch: must be at most 65536, got 4611686018427387904" \
  "$(variant micro_batch_huge 's/micro_batch: 2/micro_batch: 4611686018427387904/')"
reject negative_lr "negative_lr.yaml:17: train.lr: must be a finite number of at least train.min_lr (1e-04), got -0.001" \
  "$(variant negative_lr 's/lr: 1.0e-3/lr: -1.0e-3/')"
reject min_lr_above_lr "min_lr_above_lr.yaml:17: train.lr: must be a finite number of at least train.min_lr (0.01), got 0.001" \
  "$(variant min_lr_above_lr 's/min_lr: 1.0e-4/min_lr: 1.0e-2/')"
reject zero_steps "zero_steps.yaml:15: train.steps: must be at least 1, got 0" \
  "$(variant zero_steps 's/steps: 2/steps: 0/')"
reject bad_compute "bad_compute.yaml:23: precision.compute: expected one of fp32, fp16, bf16, fp8, got 'fp64'" \
  "$(variant bad_compute 's/compute: bf16/compute: fp64/')"
reject fp8_without_fp8_compute "fp8_without_fp8_compute.yaml:25: precision.fp8: sets how fp8 compute scales; it needs precision.compute: fp8, got bf16" \
  "$(variant fp8_without_fp8_compute 's/loss_scale: none/loss_scale: none\n  fp8: {scaling: current}/')"
reject bad_loss_scale "bad_loss_scale.yaml:24: precision.loss_scale: expected one of dynamic, static, none, got 'always'" \
  "$(variant bad_loss_scale 's/loss_scale: none/loss_scale: always/')"
reject yaml_syntax "yaml_syntax.yaml:7: YAML syntax error: illegal map value" \
  "$(variant yaml_syntax 's/dim: 32/dim: 32: 4/')"
reject yaml_tab "yaml_tab.yaml:7: YAML syntax error: illegal tab when looking for indentation" \
  "$(variant yaml_tab 's/^  dim: 32/\tdim: 32/')"
reject duplicate_key "duplicate_key.yaml:7: model.heads: duplicate key (first given at duplicate_key.yaml:6)" \
  "$(variant duplicate_key 's/dim: 32/heads: 4/')"
reject version "version.yaml:1: version: only version 1 exists, got 2" \
  "$(variant version 's/version: 1/version: 2/')"
reject checkpoint_dir_file "checkpoint_dir_file.yaml:30: checkpoint.dir: not a directory: train.txt" \
  "$(variant checkpoint_dir_file "s|dir: .*|dir: $work/train.txt|")"
reject checkpoint_under_file "checkpoint_under_file.yaml:30: checkpoint.dir: cannot create train.txt/sub: train.txt is not a directory" \
  "$(variant checkpoint_under_file "s|dir: .*|dir: $work/train.txt/sub|")"
reject missing_spec "missing.yaml: cannot open the job spec file" "$work/missing.yaml"

# Data files named by the spec.
reject missing_train "missing_train.yaml:11: data.train: file not found: no_such.txt" \
  "$(variant missing_train "s|train.txt|no_such.txt|")"
reject train_is_dir "train_is_dir.yaml:11: data.train: not a regular file: data_dir" \
  "$(variant train_is_dir "s|train.txt|data_dir|")"
reject missing_val "missing_val.yaml:12: data.val: file not found: no_val.txt" \
  "$(variant missing_val "s|val_fraction: 0.1|val: $work/no_val.txt|")"
reject unknown_builtin "unknown_builtin.yaml:11: data.train: unknown builtin dataset \"builtin:shakespeare\"" \
  "$(variant unknown_builtin "s|$work/train.txt|builtin:shakespeare|")"
reject empty_text "data file 'empty.txt': file is empty" \
  "$(variant empty_text "s|train.txt|empty.txt|")"
reject short_text "the training part of 'short.txt' holds 9 tokens, fewer than seq_len + 1 = 17" \
  "$(variant short_text "s|train.txt|short.txt|")"
reject short_header "data file 'header_only.bin': is 100 bytes, shorter than the 1024-byte llm.c token file header" \
  "$(variant short_header "s|train.txt|header_only.bin|; s/format: auto/format: tokens/")"
reject bad_magic "data file 'bad_magic.bin': bad magic 20240521" \
  "$(variant bad_magic "s|train.txt|bad_magic.bin|; s/format: auto/format: tokens/")"
reject bad_version "data file 'bad_version.bin': unsupported token file version 2" \
  "$(variant bad_version "s|train.txt|bad_version.bin|")"
reject truncated_tokens "data file 'truncated.bin': header declares 4000 tokens (8000 bytes) but the file holds 4000 bytes after the header (truncated)" \
  "$(variant truncated_tokens "s|train.txt|truncated.bin|")"
reject token_vocab "data source 'big_token.bin': token 300 at position 1234 is outside the model vocabulary (vocab 256" \
  "$(variant token_vocab "s|train.txt|big_token.bin|")"

# Command-line arguments.
reject set_unknown "--set train.lrr=0.1: train: unknown key 'lrr' (did you mean 'lr'?)" \
  "$(variant set_unknown '')" --set train.lrr=0.1
reject set_bad_value "--set train.steps=many: train.steps: expected a non-negative integer, got 'many'" \
  "$(variant set_bad_value '')" --set train.steps=many
reject set_no_equals "--set train.steps: expected key=value" \
  "$(variant set_no_equals '')" --set train.steps

summary=$work/no_dir/summary.json reject summary_no_dir \
  "cannot write --summary-json no_dir/summary.json: no directory no_dir" "$(variant summary_no_dir '')"

# Checkpoints given to --resume or model.init_from: refused, never loaded.
reject corrupt_checkpoint "checkpoint corrupt: file shard-00000-of-00001.safetensors has CRC32C" \
  "$(variant corrupt_checkpoint '')" --resume "$work/corrupt"
reject truncated_checkpoint "checkpoint truncated: file shard-00000-of-00001.safetensors has" \
  "$(variant truncated_checkpoint '')" --resume "$work/truncated"
reject no_checkpoint "no complete checkpoint in no_checkpoint" \
  "$(variant no_checkpoint '')" --resume "$work/no_checkpoint"
reject resume_seq_len "cannot resume: the checkpoint holds a model" \
  "$(variant resume_seq_len 's/seq_len: 16/seq_len: 8/')" --resume "$work/good"
reject init_seq_len "has shape (16, 32), the model expects (32, 32); model.seq_len=16 would fit it" \
  "$(variant init_seq_len 's/seq_len: 16/seq_len: 32/')" --set "model.init_from=$work/seq16.safetensors"

[ "$cases" -ge 20 ] || fail "only $cases cases"
echo "bad inputs: all $cases cases rejected with exit 2, their own message and nothing written"
