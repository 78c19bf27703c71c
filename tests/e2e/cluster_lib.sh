# Why: the service tests drive a real coordinator, real worker agents and
# the real CLI over loopback, as a user of `mixtrain submit` would; this
# file holds what they share: starting and restarting the processes on
# free ports, reading the CLI's JSON, waiting with a deadline, and
# cleaning up every process even when a check fails.
#
#   source cluster_lib.sh BIN_DIR     (defines the functions below; sets WORK)

BIN=$1
WORK=$(mktemp -d)
PY=/usr/bin/python3
COORD_PID=
COORD_PORT=0
HTTP_PORT=0
declare -A WORKER_PID=()  # worker name -> agent pid
declare -A WORKER_ID=()   # worker name -> id the coordinator gave it
declare -A WORKER_METRICS=()  # worker name -> metrics port

head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$WORK/token"
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$WORK/join-token"
chmod 600 "$WORK/token" "$WORK/join-token"
mkdir -p "$WORK/data" "$WORK/checkpoints"
export MIXTRAIN_TOKEN=$(cat "$WORK/token")
# Survivors of a dead peer give up quickly instead of after 300 s.
export MIXTRAIN_COMM_TIMEOUT_SECONDS=${MIXTRAIN_COMM_TIMEOUT_SECONDS:-20}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

# Where the processes run. Here every host is this machine on loopback;
# tests/integration/netns_lib.sh redefines these to put each host in a
# network namespace of its own.
#   host_cmd HOST         the words that run a command on HOST (coordinator,
#                         a worker's name), unquoted: `$(host_cmd a) cmd &`
#                         keeps $! the command's own pid
#   host_address HOST     the address other hosts reach HOST at
#   teardown_hosts        undoes what made the hosts, on exit
host_cmd() { :; }
host_address() { echo 127.0.0.1; }
teardown_hosts() { :; }
LISTEN_ADDR=127.0.0.1  # what servers bind: reachable from the other hosts

# on_host HOST CMD...: runs CMD on HOST in the foreground.
on_host() {
  local host=$1
  shift
  $(host_cmd "$host") "$@"
}

alive() { [ -e "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# Every process of ours still running, children of the agents first.
cleanup() {
  local pid child
  for pid in "${WORKER_PID[@]}" $COORD_PID; do
    for child in $(pgrep -P "$pid" 2>/dev/null); do kill -9 "$child" 2>/dev/null || true; done
    alive "$pid" && kill -9 "$pid" 2>/dev/null || true
  done
  teardown_hosts
  if [ -z "${KEEP_WORK:-}" ]; then rm -rf "$WORK"; else echo "kept $WORK" >&2; fi
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  local f
  for f in "$WORK"/*.log; do
    [ -e "$f" ] || continue
    echo "---- $f (last 30 lines)" >&2
    tail -n 30 "$f" >&2
  done
  exit 1
}

# Runs `$1` (a shell condition) until it holds or `$2` seconds pass; fails naming `$3`.
wait_for() {
  local deadline=$((SECONDS + $2))
  until eval "$1"; do
    [ $SECONDS -lt $deadline ] || fail "timed out after $2 s waiting for $3"
    sleep 0.2
  done
}

# start_coordinator [EXTRA_ARGS...]: on COORD_PORT when one was bound before
# (a restart keeps the address workers know), else a free port; workers
# silent for WORKER_TIMEOUT seconds (default 3) are lost.
start_coordinator() {
  local log="$WORK/coordinator.log"
  : >"$log.new"
  $(host_cmd coordinator) "$BIN/mixtrain-coordinator" \
    --listen "$LISTEN_ADDR:$COORD_PORT" --http "$LISTEN_ADDR:$HTTP_PORT" \
    --db "$WORK/state.db" --auth-token-file "$WORK/token" --join-token-file "$WORK/join-token" \
    --data-root "$WORK/data" --checkpoint-root "$WORK/checkpoints" --worker-timeout-seconds "${WORKER_TIMEOUT:-3}" \
    "$@" 2>>"$log.new" &
  COORD_PID=$!
  wait_for "grep -q 'serving on port' '$log.new'" 20 "the coordinator to serve"
  COORD_PORT=$(grep -o 'serving on port [0-9]*' "$log.new" | head -1 | grep -o '[0-9]*$')
  HTTP_PORT=$(grep -o 'http on port [0-9]*' "$log.new" | head -1 | grep -o '[0-9]*$')
  cat "$log.new" >>"$log" && rm -f "$log.new"
  export MIXTRAIN_COORDINATOR=127.0.0.1:$COORD_PORT  # the CLI runs on the coordinator's host
}

# Ends the coordinator with SIGKILL (a crash, not a clean stop).
kill_coordinator() {
  kill -9 "$COORD_PID"
  wait "$COORD_PID" 2>/dev/null || true
}

# start_worker NAME [EXTRA_ARGS...]: an agent registered with the coordinator,
# its metrics on METRICS_PORT (default 0: a free port).
start_worker() {
  local name=$1 && shift
  local log="$WORK/worker-$name.log"
  : >"$log"
  $(host_cmd "$name") "$BIN/mixtrain-worker" --coordinator "$(host_address coordinator):$COORD_PORT" \
    --join-token-file "$WORK/join-token" --metrics-listen "$LISTEN_ADDR:${METRICS_PORT:-0}" \
    --backend cpu "$@" \
    2>"$log" &
  WORKER_PID[$name]=$!
  wait_for "grep -q 'registered as' '$log'" 20 "worker $name to register"
  WORKER_ID[$name]=$(grep -o 'registered as [^ ]*' "$log" | head -1 | awk '{print $3}')
  WORKER_METRICS[$name]=$(grep -o 'metrics on port [0-9]*' "$log" | head -1 | grep -o '[0-9]*$')
}

# The name of the worker whose coordinator id is `$1`.
worker_named() {
  local name
  for name in "${!WORKER_ID[@]}"; do
    [ "${WORKER_ID[$name]}" = "$1" ] && echo "$name" && return
  done
}

mixtrain() { on_host coordinator "$BIN/mixtrain" "$@"; }

# job_field ID EXPR: `EXPR` (Python over `j`, the `status -o json` object).
job_field() {
  mixtrain -o json status "$1" | $PY -c "import json,sys; j=json.load(sys.stdin); print($2)"
}

# submit SPEC_FILE: prints the new job's id.
submit() {
  mixtrain -o json submit "$1" | $PY -c "import json,sys; print(json.load(sys.stdin)['id'])"
}

# wait_state ID STATE SECONDS
wait_state() {
  wait_for "[ \"\$(job_field $1 \"j['state']\")\" = $2 ]" "$3" "job $1 to be $2"
}

# ends_as ID STATE SECONDS: waits for job ID to end, then fails at once
# unless it ended as STATE.
ends_as() {
  wait_for "job_field $1 \"j['state']\" | grep -qE '^(SUCCEEDED|FAILED|CANCELLED)\$'" "$3" \
    "job $1 to end"
  local state
  state=$(job_field "$1" "j['state']")
  [ "$state" = "$2" ] || fail "job $1 ended $state, not $2"
}

# reference NAME SPEC_FILE NPROC: SPEC_FILE trained by `mixtrain train
# --nproc NPROC` on one host, without the service, its final weights
# exported to $WORK/NAME.safetensors.
reference() {
  mixtrain train "$2" --nproc "$3" --set "checkpoint.dir=$WORK/$1" >"$WORK/$1.log" 2>&1 ||
    fail "the reference run $1 failed"
  mixtrain export "$WORK/$1" --format safetensors -O "$WORK/$1.safetensors" 2>>"$WORK/$1.log" ||
    fail "export of the reference run $1"
}

# same_weights ID NAME: job ID's final weights equal reference NAME's, byte for byte.
same_weights() {
  rm -f "$WORK/$1.safetensors"
  mixtrain export "$WORK/checkpoints/$1" --format safetensors -O "$WORK/$1.safetensors" ||
    fail "export of job $1"
  cmp -s "$WORK/$1.safetensors" "$WORK/$2.safetensors" ||
    fail "job $1's final weights differ from those of the uninterrupted run $2"
}

# write_spec FILE NAME [EXTRA_YAML]: a small 2-worker ZeRO-2 bf16 GPT job on
# the built-in corpus that checkpoints every 20 steps (STEPS, DIM, SEQ and
# BATCH size it; WORKERS and STAGE change its world size and ZeRO stage).
write_spec() {
  cat >"$1" <<SPEC
version: 1
name: $2
model: {arch: gpt, layers: 2, heads: 4, dim: ${DIM:-64}, seq_len: ${SEQ:-32}, vocab: 256}
data: {train: "builtin:demo", val_fraction: 0.1, format: text}
train: {steps: ${STEPS:-120}, micro_batch: ${BATCH:-4}, grad_accum: 1, lr: 1.0e-3, min_lr: 1.0e-4,
        warmup_steps: 10, seed: 7, eval_every: 40, eval_batches: 4}
precision: {compute: bf16}
zero: {stage: ${STAGE:-2}}
resources: {workers: ${WORKERS:-2}, backend: cpu}
checkpoint: {every: 20, keep: 3}
retries: {max_restarts: 2}
${3:-}
SPEC
}
