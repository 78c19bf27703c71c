#!/usr/bin/env bash
# Why: the claim of mixed-precision training (Micikevicius et al., 2018) is
# that 16-bit compute with fp32 master weights, and loss scaling for fp16,
# reaches the loss fp32 reaches. This trains the same character-level GPT
# on Tiny Shakespeare with the same seed and steps in fp32, bf16 and fp16
# (dynamic loss scaling) with the real `mixtrain train`, and checks that
# each 16-bit final validation loss is within 2% of fp32's.
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

for precision in fp32 bf16 fp16; do
  scaling=none
  [ "$precision" = fp16 ] && scaling=dynamic
  "$mixtrain" train "$source_dir/examples/shakespeare-char.yaml" "${model[@]}" \
    --set precision.compute=$precision --set precision.loss_scale=$scaling \
    --set "checkpoint.dir=$work/ckpt-$precision" --summary-json "$work/$precision.json" \
    >"$work/$precision.txt" 2>&1 || { cat "$work/$precision.txt"; echo "FAIL: $precision run"; exit 1; }
done

fp32=$(val_loss "$work/fp32.json")
status=0
for precision in bf16 fp16; do
  loss=$(val_loss "$work/$precision.json")
  verdict=$(awk -v a="$loss" -v b="$fp32" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d;
    printf "%s %.2f%%", (d <= 0.02 ? "ok" : "FAIL"), 100 * d }')
  echo "final val loss: fp32 $fp32, $precision $loss (difference ${verdict#* }) ${verdict%% *}"
  [ "${verdict%% *}" = ok ] || status=1
done
exit $status
