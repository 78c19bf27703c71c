#!/usr/bin/env bash
# Why: a rank that dies (the OOM killer, a crash) must not leave its peers
# blocked in a collective or the launcher waiting forever. This runs the
# demo job as `mixtrain train --nproc 3` with a 5 s collective timeout,
# SIGKILLs rank 2 once the ranks are training, and expects the launcher to
# exit non-zero within the timeout and a margin, the survivors' errors to
# name rank 2 and the collective they were in, and no rank to outlive it.
#   dead_rank_test.sh MIXTRAIN_BINARY SOURCE_DIR
set -euo pipefail
mixtrain=$1
source_dir=$2
timeout_s=5
limit_s=$((timeout_s + 25))
work=$(mktemp -d)
launcher=
ranks=()

# A process that has not ended (a zombie has).
alive() { [ -e "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
cleanup() {
  for pid in $launcher "${ranks[@]}"; do
    if alive "$pid"; then kill -9 "$pid" || true; fi
  done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  echo "---- stdout" >&2 && cat "$work/out.txt" >&2
  echo "---- stderr" >&2 && cat "$work/err.txt" >&2
  exit 1
}

MIXTRAIN_COMM_TIMEOUT_SECONDS=$timeout_s "$mixtrain" train "$source_dir/examples/demo.yaml" \
  --nproc 3 --set train.steps=100000 --set train.eval_every=100000 \
  --set checkpoint.every=100000 --set "checkpoint.dir=$work/ckpt" \
  >"$work/out.txt" 2>"$work/err.txt" &
launcher=$!

# Training has begun once rank 0 reports its second step.
for _ in $(seq 600); do
  grep -q '^step 2/' "$work/out.txt" && break
  alive "$launcher" || fail "the launcher ended before training"
  sleep 0.1
done
grep -q '^step 2/' "$work/out.txt" || fail "no progress line for step 2 within 60 s"

victim=
for pid in $(pgrep -P "$launcher"); do
  ranks+=("$pid")
  if tr '\0' '\n' <"/proc/$pid/environ" | grep -qx 'MIXTRAIN_RANK=2'; then victim=$pid; fi
done
[ "${#ranks[@]}" -eq 3 ] || fail "the launcher has ${#ranks[@]} rank processes, want 3"
[ -n "$victim" ] || fail "no rank process has MIXTRAIN_RANK=2"

kill -9 "$victim"
start=$SECONDS
while alive "$launcher" && [ $((SECONDS - start)) -le "$limit_s" ]; do sleep 0.2; done
elapsed=$((SECONDS - start))
alive "$launcher" && fail "the launcher still runs ${limit_s} s after rank 2 was killed"
code=0
wait "$launcher" || code=$?
launcher=
echo "rank 2 killed: the launcher exited $code after ${elapsed} s; its stderr:"
cat "$work/err.txt"

[ "$code" -ne 0 ] || fail "the launcher exited 0 after rank 2 was killed"
grep -Eq '(all_reduce|reduce_scatter|all_gather|broadcast|barrier): rank 2 \(' "$work/err.txt" \
  || fail "no error names rank 2 and the collective"
for pid in "${ranks[@]}"; do
  if alive "$pid"; then fail "rank process $pid outlived the launcher"; fi
done
echo "PASS"
