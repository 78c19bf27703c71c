#!/usr/bin/env bash
# Why: `mixtrain local` is what `make demo` runs: a coordinator and N real
# workers on loopback that train the job to success, leave its checkpoint
# where `mixtrain sample` finds it, write the summary, and then leave no
# process and no state directory behind.
#   local_cluster_test.sh BIN_DIR
set -euo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$work/out" "$work/err" >&2 2>/dev/null || true; exit 1; }
mkdir -p "$work/tmp" "$work/run"
cat >"$work/run/tiny.yaml" <<'SPEC'
version: 1
name: tiny
model: {arch: gpt, layers: 1, heads: 2, dim: 32, seq_len: 16, vocab: 256}
data: {train: "builtin:demo", val_fraction: 0.1}
train: {steps: 40, micro_batch: 4, warmup_steps: 4, eval_every: 20, eval_batches: 2}
precision: {compute: fp16}
zero: {stage: 3}
resources: {workers: 2, backend: cpu}
checkpoint: {every: 20}
SPEC
cd "$work/run"
TMPDIR=$work/tmp OMP_NUM_THREADS=1 "$bin/mixtrain" local tiny.yaml --workers 2 \
  --summary-json "$work/summary.json" >"$work/out" 2>"$work/err" || fail "local exited $?"
/usr/bin/python3 - "$work/summary.json" <<'PY' || fail "summary: $(cat "$work/summary.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["status"] == "succeeded" and s["steps"] == 40, s
assert s["world_size"] == 2 and s["zero_stage"] == 3 and s["compute_dtype"] == "fp16", s
assert [r["rank"] for r in s["ranks"]] == [0, 1], s["ranks"]
PY
[ -d checkpoints/tiny ] || fail "no checkpoints/tiny left for mixtrain sample"
"$bin/mixtrain" sample checkpoints/tiny --prompt "the" --tokens 16 >"$work/sample" 2>&1 \
  || fail "sample from checkpoints/tiny: $(cat "$work/sample")"
[ -z "$(ls "$work/tmp")" ] || fail "state directory left in TMPDIR: $(ls "$work/tmp")"
if pgrep -f "$work/tmp" >/dev/null; then fail "processes of the local cluster still run"; fi
echo "local_cluster: all checks passed"
