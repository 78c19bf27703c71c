#!/usr/bin/env bash
# Why: issue 5's end-to-end path as a user sees it. A coordinator and two
# worker agents on loopback; the CLI submits a 2-rank ZeRO-2 bf16 job that
# must succeed with its summary in `status -o json` and its lines in
# `logs`, while both workers serve training metrics that /sd/workers lists;
# then a second job is cancelled mid-run and every rank must be gone within
# 10 s with both workers idle again; a worker holding the wrong join token
# is refused; and the same cluster works over TLS with a throwaway CA.
#   service_cluster_test.sh BIN_DIR
set -euo pipefail
source "$(dirname "$0")/cluster_lib.sh" "$1"

start_coordinator
start_worker a
start_worker b
wait_for "[ \"\$(mixtrain -o json workers | $PY -c 'import json,sys; print(sum(w[\"state\"]==\"IDLE\" for w in json.load(sys.stdin)))')\" = 2 ]" 10 "two idle workers"

# --- a job runs to success ---------------------------------------------------
STEPS=1500 write_spec "$WORK/data/e2e.yaml" e2e
id=$(submit "$WORK/data/e2e.yaml")
wait_state "$id" RUNNING 20
wait_for "[ \"\$(job_field $id \"j['step']\")\" -ge 10 ]" 60 "job $id to train"
# While it trains both workers serve its series, and /sd/workers lists both.
for name in a b; do
  metrics=$(curl -sf "http://127.0.0.1:${WORKER_METRICS[$name]}/metrics") || fail "worker $name /metrics"
  for series in mixtrain_train_loss mixtrain_loss_scale mixtrain_steps_total \
                mixtrain_step_duration_seconds_bucket mixtrain_memory_bytes; do
    # A here-string, not a pipe: grep -q stops at the first match, and
    # under pipefail a writer killed by SIGPIPE would fail the check.
    grep -q "^$series{.*job_id=\"$id\"" <<<"$metrics" || fail "worker $name lacks $series for $id"
  done
done
sd=$(curl -sf "http://127.0.0.1:$HTTP_PORT/sd/workers") || fail "/sd/workers"
for name in a b; do
  echo "$sd" | $PY -c "
import json, sys
targets = [t for group in json.load(sys.stdin) for t in group['targets']]
sys.exit(0 if any(t.endswith(':${WORKER_METRICS[$name]}') for t in targets) else 1)" \
    || fail "/sd/workers does not list worker $name: $sd"
done
coordinator_metrics=$(curl -sf "http://127.0.0.1:$HTTP_PORT/metrics") || fail "coordinator /metrics"
grep -q '^mixtrain_jobs{state="running"} 1' <<<"$coordinator_metrics" \
  || fail "coordinator /metrics does not count the running job"

wait_state "$id" SUCCEEDED 300
mixtrain -o json status "$id" >"$WORK/status.json"
$PY - "$WORK/status.json" <<'PYCHECK' || fail "status -o json: $(cat "$WORK/status.json")"
import json, sys
j = json.load(open(sys.argv[1]))
s = j["summary"]
assert j["state"] == "SUCCEEDED" and j["step"] == 1500 and j["steps"] == 1500, j
assert len(j["workers"]) == 2, j
assert s["status"] == "succeeded" and s["steps"] == 1500, s
assert s["world_size"] == 2 and s["zero_stage"] == 2 and s["compute_dtype"] == "bf16", s
assert [r["rank"] for r in s["ranks"]] == [0, 1], s["ranks"]
assert s["final_val_loss"] > 0 and s["tokens_per_second"] > 0, s
PYCHECK
mixtrain logs "$id" >"$WORK/logs.txt"
grep -q "step" "$WORK/logs.txt" || fail "logs $id shows no training lines"
# The finished task's series are gone from the workers.
for name in a b; do
  metrics=$(curl -sf "http://127.0.0.1:${WORKER_METRICS[$name]}/metrics") || fail "worker $name /metrics"
  if grep -q "job_id=\"$id\"" <<<"$metrics"; then
    fail "worker $name still exports series of finished job $id"
  fi
done

# --- cancel stops every rank within 10 s ------------------------------------
STEPS=100000 write_spec "$WORK/data/long.yaml" long
id=$(submit "$WORK/data/long.yaml")
wait_for "[ \"\$(job_field $id \"j['step']\")\" -ge 2 ]" 60 "job $id to train"
start=$SECONDS
mixtrain cancel "$id" >/dev/null
wait_for "[ -z \"\$(pgrep -P ${WORKER_PID[a]}; pgrep -P ${WORKER_PID[b]})\" ]" 10 "every rank of $id to stop"
echo "cancel: ranks gone after $((SECONDS - start)) s"
wait_for "[ \"\$(mixtrain -o json workers | $PY -c 'import json,sys; print(sum(w[\"state\"]==\"IDLE\" for w in json.load(sys.stdin)))')\" = 2 ]" 10 "both workers idle after the cancel"
[ "$(job_field "$id" "j['state']")" = CANCELLED ] || fail "job $id is not CANCELLED"

# --- a worker with the wrong join token is refused --------------------------
echo wrong-token >"$WORK/bad-join-token"
"$BIN/mixtrain-worker" --coordinator "127.0.0.1:$COORD_PORT" --join-token-file "$WORK/bad-join-token" \
  --metrics-listen 127.0.0.1:0 --backend cpu 2>"$WORK/worker-bad.log" &
bad=$!
WORKER_PID[bad]=$bad
wait_for "grep -qi 'invalid token\|unauthenticated' '$WORK/worker-bad.log'" 10 "the bad worker to be refused"
[ "$(mixtrain -o json workers | $PY -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 2 ] \
  || fail "a worker with the wrong join token was registered"
kill -9 "$bad" 2>/dev/null || true

# --- TLS: the same cluster behind a throwaway CA ----------------------------
tls=$WORK/tls && mkdir -p "$tls"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=mixtrain test CA" \
  -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$tls/server.key" \
  -out "$tls/server.csr" 2>/dev/null
printf "subjectAltName=DNS:localhost,IP:127.0.0.1\n" >"$tls/san.ext"
openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
  -days 1 -extfile "$tls/san.ext" -out "$tls/server.pem" 2>/dev/null
for name in a b; do kill -TERM "${WORKER_PID[$name]}"; done
for name in a b; do wait "${WORKER_PID[$name]}" 2>/dev/null || true; done
kill -TERM "$COORD_PID" && wait "$COORD_PID" || true
COORD_PORT=0 HTTP_PORT=0
start_coordinator --tls-cert "$tls/server.pem" --tls-key "$tls/server.key"
start_worker c --tls-ca "$tls/ca.pem"
mixtrain --tls-ca "$tls/ca.pem" -o json workers | grep -q "${WORKER_ID[c]}" \
  || fail "TLS: the CLI does not see worker c"
set +e
mixtrain jobs >/dev/null 2>"$WORK/plain.err"
code=$?
set -e
[ $code = 3 ] || fail "TLS: a plaintext client got exit $code, expected 3"
echo "service_cluster: all checks passed"
