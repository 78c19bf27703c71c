#!/usr/bin/env bash
# Why: issue 12's normal case. The coordinator, three workers and
# Prometheus each on a host of their own (netns_lib.sh), as in
# `docker-compose up --scale worker=3`. Each worker advertises its own
# address on its route to the coordinator, so a 2-worker ZeRO-1 job and a
# 3-worker ZeRO-3 job (bf16) train across hosts and end with final weights
# byte-identical to `mixtrain train --nproc N` on one host; Prometheus,
# knowing only the coordinator's name, scrapes it and finds every worker
# through /sd/workers. Addresses no other host could reach (a host name
# that resolves to 127.0.1.1, on the worker's resolver or on the
# coordinator's) are refused with a message naming the flag to use.
#   multihost_cluster_test.sh BIN_DIR DEPLOY_DIR
set -euo pipefail
DEPLOY=$2
source "$(dirname "$0")/netns_lib.sh" "$1" a b c prometheus

# --- the references: one host, N local ranks ---------------------------------
for n in 2 3; do
  WORKERS=$n STAGE=$([ "$n" = 2 ] && echo 1 || echo 3) STEPS=160 \
    write_spec "$WORK/data/job$n.yaml" "multihost$n"
  reference "reference$n" "$WORK/data/job$n.yaml" "$n"
done

start_coordinator
for name in a b c; do start_worker "$name" --threads 1; done

# --- every worker advertises its own host's address -------------------------
# A worker is JOINING until its first heartbeat and task stream, then IDLE.
wait_for "[ \"\$(mixtrain -o json workers | $PY -c 'import json,sys; print(sum(w[\"state\"]==\"IDLE\" for w in json.load(sys.stdin)))')\" = 3 ]" 20 "three idle workers"
mixtrain -o json workers >"$WORK/workers.json"
$PY - "$WORK/workers.json" "${HOST_IP[a]}" "${HOST_IP[b]}" "${HOST_IP[c]}" <<'PYCHECK' ||
import json, sys
workers = json.load(open(sys.argv[1]))
assert sorted(w["data_address"] for w in workers) == sorted(sys.argv[2:]), workers
for w in workers:
    assert w["metrics_address"].startswith(w["data_address"] + ":"), w
    assert w["threads"] == 1 and w["state"] == "IDLE", w
PYCHECK
  fail "workers: $(cat "$WORK/workers.json")"
mixtrain workers | grep -q "DATA ADDRESS" || fail "the workers table has no DATA ADDRESS column"

# --- unreachable addresses are refused ---------------------------------------
# refused NAME MESSAGE ARGS...: an agent on host a with ARGS exits 2 within
# 20 s, its log naming MESSAGE.
refused() {
  local name=$1 message=$2 rc=0
  shift 2
  on_host a timeout 20 "$BIN/mixtrain-worker" --coordinator "coordinator:$COORD_PORT" \
    --join-token-file "$WORK/join-token" --metrics-listen 0.0.0.0:0 --backend cpu "$@" \
    2>"$WORK/worker-$name.log" || rc=$?
  [ "$rc" = 2 ] || fail "worker $name exited $rc, not 2"
  grep -q -- "$message" "$WORK/worker-$name.log" || fail "worker $name does not say '$message'"
}
# host-a is 127.0.1.1 on host a: refused by the agent itself.
refused own-name 'the data address "host-a" resolves to the loopback address 127.0.1.1.*--data-address' \
  --data-address host-a
refused own-metrics-name 'the metrics address host "host-a" resolves to the loopback address.*--advertise-host' \
  --advertise-host host-a
# host-coordinator is unknown on host a but 127.0.1.1 on the coordinator's.
refused coordinator-name 'registration refused: the data address "host-coordinator" resolves to the loopback' \
  --data-address host-coordinator
[ "$(mixtrain -o json workers | $PY -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 3 ] ||
  fail "a refused worker was registered"

# --- Prometheus on its own host, knowing only the coordinator's name ---------
mkdir -p "$WORK/prometheus"
cp "$DEPLOY/prometheus/prometheus.yml" "$DEPLOY/prometheus/alerts.yml" "$WORK/prometheus/"
$(host_cmd prometheus) prometheus --config.file="$WORK/prometheus/prometheus.yml" \
  --storage.tsdb.path="$WORK/prometheus/data" --web.listen-address=127.0.0.1:9090 \
  >"$WORK/prometheus.log" 2>&1 &
# prom_query EXPR: the number of series the instant query returns.
prom_query() {
  on_host prometheus curl -sf --get --data-urlencode "query=$1" http://127.0.0.1:9090/api/v1/query |
    $PY -c "import json,sys; print(len(json.load(sys.stdin)['data']['result']))" 2>/dev/null || echo 0
}

# --- jobs across hosts match one host, byte for byte -------------------------
for n in 2 3; do
  id=$(submit "$WORK/data/job$n.yaml")
  wait_state "$id" SUCCEEDED 300
  [ "$(job_field "$id" "j['attempt']")" = 1 ] || fail "job $id needed a restart"
  same_weights "$id" "reference$n"
  echo "$n workers on $n hosts: job $id matched the $n-rank run on one host"
done

# Every target up: the coordinator and, through /sd/workers, each worker.
wait_for "[ \"\$(prom_query 'up{job=\"mixtrain-workers\"} == 1')\" = 3 ]" 60 \
  "Prometheus to scrape the three workers found through /sd/workers"
wait_for "[ \"\$(prom_query 'up{job=\"mixtrain-coordinator\"} == 1')\" = 1 ]" 30 \
  "Prometheus to scrape the coordinator"
wait_for "[ \"\$(prom_query 'mixtrain_workers{state=\"idle\"} == 3')\" = 1 ]" 30 \
  "Prometheus to see the coordinator's three idle workers"
for name in a b c; do
  [ "$(prom_query "up{instance=~\"${HOST_IP[$name]}:.*\"} == 1")" = 1 ] ||
    fail "worker $name's /metrics at ${HOST_IP[$name]} is not scraped"
done
echo "multihost_cluster: all checks passed"
