#!/usr/bin/env bash
# Why: the claim of mixed-precision training (Micikevicius et al., 2018) is
# that 16-bit compute with fp32 master weights, and loss scaling for fp16,
# reaches the loss fp32 reaches. This trains the same character-level GPT
# on Tiny Shakespeare with the same seed and steps in fp32, bf16 and fp16
# (dynamic loss scaling) with the real `mixtrain train`, and checks that
# each 16-bit final validation loss is within 2% of fp32's; then compute
# fp8 with each scaling recipe (delayed, current, mxfp8), each within 2% of
# bf16's.
#   precision_agreement_test.sh MIXTRAIN_BINARY SOURCE_DIR
# Exit 77 (skipped) when ../shared/data/tinyshakespeare.txt is absent.
set -euo pipefail
mixtrain=$1
source_dir=$2
data="$source_dir/../shared/data/tinyshakespeare.txt"
[ -f "$data" ] || { echo "SKIP: $data not found"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

model=(--set model.layers=4 --set model.heads=4 --set model.dim=128 --set model.seq_len=64
       --set "data.train=$data" --set train.steps=500 --set train.micro_batch=16 --set train.lr=2e-3
       --set train.warmup_steps=50 --set train.eval_every=500 --set train.eval_batches=20
       --set checkpoint.every=500 --set resources.workers=1 --set zero.stage=0)

val_loss() { sed -n 's/.*"final_val_loss": \([0-9.eE+-]*\).*/\1/p' "$1"; }

# run NAME --set ...: one training run, its summary in $work/NAME.json.
run() {
  local name=$1
  shift
  "$mixtrain" train "$source_dir/examples/shakespeare-char.yaml" "${model[@]}" "$@" \
    --set "checkpoint.dir=$work/ckpt-$name" --summary-json "$work/$name.json" \
    >"$work/$name.txt" 2>&1 || { cat "$work/$name.txt"; echo "FAIL: $name run"; exit 1; }
}

for precision in fp32 bf16 fp16; do
  scaling=none
  [ "$precision" = fp16 ] && scaling=dynamic
  run $precision --set precision.compute=$precision --set precision.loss_scale=$scaling
done
for recipe in delayed current mxfp8; do
  run fp8-$recipe --set precision.compute=fp8 --set "precision.fp8={scaling: $recipe}"
done

status=0
# compare REFERENCE NAME: NAME's final val loss within 2% of REFERENCE's.
compare() {
  local want loss verdict
  want=$(val_loss "$work/$1.json")
  loss=$(val_loss "$work/$2.json")
  verdict=$(awk -v a="$loss" -v b="$want" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d;
    printf "%s %.2f%%", (d <= 0.02 ? "ok" : "FAIL"), 100 * d }')
  echo "final val loss: $1 $want, $2 $loss (difference ${verdict#* }) ${verdict%% *}"
  [ "${verdict%% *}" = ok ] || status=1
}
compare fp32 bf16
compare fp32 fp16
for recipe in delayed current mxfp8; do
  compare bf16 fp8-$recipe
  echo "  fp8-$recipe saturated: $(/usr/bin/python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["ranks"][0]["fp8_saturated"])' "$work/fp8-$recipe.json")"
done
exit $status
