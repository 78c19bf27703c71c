#!/usr/bin/env bash
# Why: `mixtrain plan` is what a user reads before sizing a job, and what
# scripts read with -o json. This drives the real binary: the JSON holds
# the summary's memory_bytes object and the costs, the alternatives come
# cheapest first and each fits the budget, a budget too small for
# anything lists none and says the job does not fit, the table names the
# categories, `auto` keys become the cheapest listed choice that fits, and
# bad input (a size that is not one, `auto` where it is not allowed or
# cannot be kept, a shape too large for 64-bit byte counts) exits 2 with a
# message.
#   plan_cli_test.sh MIXTRAIN_BINARY
set -euo pipefail
mixtrain=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat >"$work/job.yaml" <<'YAML'
name: plan-cli
model: {layers: 4, heads: 4, dim: 128, seq_len: 64, vocab: 256}
data: {train: "builtin:demo"}
train: {micro_batch: 4}
YAML

"$mixtrain" plan "$work/job.yaml" --workers 2 --memory-per-worker 15MiB -o json >"$work/plan.json"
python3 - "$work/plan.json" <<'EOF'
import json, sys
plan = json.load(open(sys.argv[1]))
budget = 15 << 20
assert plan["workers"] == 2 and plan["backend"] == "cpu", plan
device = plan["memory_bytes"]["device"]
keys = ["params", "grads", "master_params", "optimizer_state", "activations",
        "gathered_params", "comm_buffers", "workspace", "peak"]
assert list(device) == keys, list(device)
assert device["peak"] == sum(device[k] for k in keys[:-1]), device
host = plan["memory_bytes"]["host"]
assert plan["fits"] == (device["peak"] + host["peak"] <= budget), plan["fits"]  # one RAM
alternatives = plan["alternatives"]
assert alternatives, "a 15 MiB budget fits some choice"
costs = [(a["comm_elements_per_step"], a["recompute_flops_per_step"],
          a["host_traffic_bytes_per_step"]) for a in alternatives]
assert costs == sorted(costs), costs
for a in alternatives:
    memory = a["memory_bytes"]
    assert memory["device"]["peak"] + memory["host"]["peak"] <= budget, a
print(f"plan: peak {device['peak']} bytes, fits 15 MiB: {plan['fits']}, "
      f"{len(alternatives)} alternatives, cheapest {alternatives[0]['zero_stage']}/"
      f"{alternatives[0]['activation_checkpointing']}")
EOF

"$mixtrain" plan "$work/job.yaml" --workers 2 --memory-per-worker 1MiB -o json >"$work/tiny.json"
python3 -c "
import json, sys
plan = json.load(open(sys.argv[1]))
assert plan['fits'] is False and plan['alternatives'] == [], plan['alternatives']
" "$work/tiny.json"

"$mixtrain" plan "$work/job.yaml" --memory-per-worker 1MiB >"$work/table.txt"
for word in activations workspace "does not fit" "none: no ZeRO stage"; do
  grep -q "$word" "$work/table.txt" || fail "the table lacks '$word':
$(cat "$work/table.txt")"
done

expect_refusal() {  # expect_refusal NAME MESSAGE ARGS...
  local name=$1 message=$2
  shift 2
  set +e
  "$mixtrain" plan "$@" >"$work/out.txt" 2>"$work/err.txt"
  local rc=$?
  set -e
  [ "$rc" = 2 ] || fail "$name: exit $rc, expected 2"
  grep -q -- "$message" "$work/err.txt" || fail "$name: stderr lacks '$message': $(cat "$work/err.txt")"
  echo "$name: $(head -1 "$work/err.txt")"
}
expect_refusal not_a_size "is not a memory size" "$work/job.yaml" --memory-per-worker 80GiBs
expect_refusal zero_size "is not a memory size" "$work/job.yaml" --memory-per-worker 0
expect_refusal auto_dtype "expected one of fp32" "$work/job.yaml" --set precision.compute=auto
expect_refusal auto_conflict "needs zero.offload_optimizer cpu" "$work/job.yaml" \
  --set zero.stage=auto --set zero.offload_params=cpu
expect_refusal auto_too_small "no choice of zero.stage, train.activation_checkpointing (auto)" \
  "$work/job.yaml" --set zero.stage=auto --set train.activation_checkpointing=auto \
  --memory-per-worker 1MiB

# `auto` keys are chosen for the budget: the cheapest listed alternative
# that keeps the keys written (offloads none), and the plan is of it.
"$mixtrain" plan "$work/job.yaml" --workers 2 --memory-per-worker 15MiB \
  --set zero.stage=auto --set train.activation_checkpointing=auto -o json >"$work/auto.json"
python3 - "$work/plan.json" "$work/auto.json" <<'EOF'
import json, sys
listed = json.load(open(sys.argv[1]))["alternatives"]
chosen = json.load(open(sys.argv[2]))
assert chosen["auto"] == ["zero.stage", "train.activation_checkpointing"], chosen["auto"]
keeping = [a for a in listed
           if a["offload_optimizer"] == "none" and a["offload_params"] == "none"]
first = {k: keeping[0][k] for k in chosen["choice"]}
assert chosen["choice"] == first, (chosen["choice"], first)
assert chosen["fits"] is True, chosen
print(f"auto: chose zero.stage {first['zero_stage']} + {first['activation_checkpointing']}")
EOF
"$mixtrain" plan "$work/job.yaml" --workers 2 --memory-per-worker 15MiB \
  --set zero.stage=auto >"$work/auto.txt"
grep -q "^auto chose zero.stage [0-3]$" "$work/auto.txt" || fail "no 'auto chose' line:
$(cat "$work/auto.txt")"
expect_refusal too_large "too large to plan" "$work/job.yaml" --set model.layers=1024 \
  --set model.dim=65536 --set model.heads=1024 --set model.seq_len=131072 \
  --set train.micro_batch=65536
echo "plan CLI: ok"
