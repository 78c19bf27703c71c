#!/usr/bin/env bash
# Why: a coordinator without token files once served every interface with
# no authentication and no warning (issue 13). This starts the real binary
# with each combination that matters and checks the defaults: loopback
# unless both tokens are set, a refusal (exit 2, naming the missing files
# and --insecure) for another address, a plain warning whenever a service
# takes calls without a token, and none with both tokens. The HTTP port
# (/metrics, /sd/workers: never authenticated) follows the same default
# (issue 29: it stayed on 0.0.0.0).
#   coordinator_security_test.sh COORDINATOR_BINARY
set -euo pipefail
coordinator_bin=$1
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  cat "$work"/*.log >&2 || true
  exit 1
}
echo "client-$RANDOM" >"$work/token"
echo "join-$RANDOM" >"$work/join"

# serve NAME ARGS...: starts a coordinator logging to NAME.log and waits
# until it serves; SERVED_PORT is its gRPC port. HTTP on a free loopback
# port unless DEFAULT_HTTP=1.
serve() {
  local name=$1 && shift
  local http=(--http 127.0.0.1:0)
  [ "${DEFAULT_HTTP:-0}" = 1 ] && http=()
  "$coordinator_bin" --db "$work/$name.db" "${http[@]}" "$@" 2>"$work/$name.log" &
  pids+=($!)
  for _ in $(seq 100); do
    SERVED_PORT=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$work/$name.log" | head -1)
    [ -n "$SERVED_PORT" ] && return 0
    sleep 0.1
  done
  fail "$name: the coordinator did not serve"
}

# listening_on PORT: the local addresses with a listening TCP socket on PORT.
listening_on() { ss -Hltn "sport = :$1" | awk '{print $4}'; }

# refused NAME ARGS...: the coordinator must exit 2 at once, naming what to do.
refused() {
  local name=$1 && shift
  local rc=0
  "$coordinator_bin" --db "$work/$name.db" --http 127.0.0.1:0 "$@" 2>"$work/$name.log" || rc=$?
  [ "$rc" = 2 ] || fail "$name: exit $rc, expected 2"
  grep -q "refusing to serve on 0.0.0.0:0 without" "$work/$name.log" || fail "$name: no refusal"
  grep -q -- "--insecure" "$work/$name.log" || fail "$name: the refusal does not name --insecure"
}

# 1. No token files, no --listen: loopback only, with a warning.
if [ -z "$(listening_on 50051)" ]; then
  serve default
  [ "$SERVED_PORT" = 50051 ] || fail "default: served on port $SERVED_PORT"
  # gRPC may bind 127.0.0.1 as the v4-mapped [::ffff:127.0.0.1].
  for address in $(listening_on 50051); do
    case $address in
      127.0.0.1:50051 | "[::ffff:127.0.0.1]:50051") ;;
      *) fail "default: listening on $address, expected 127.0.0.1:50051 only" ;;
    esac
  done
  grep -q "WARNING: no --auth-token-file and --join-token-file: every local user" \
    "$work/default.log" || fail "default: no warning"
  kill "${pids[-1]}" && wait "${pids[-1]}" || true
else
  echo "port 50051 is taken here: skipping the default-address case"
fi

# 2. A non-loopback address without both tokens is refused, naming the
#    missing file(s).
refused none --listen 0.0.0.0:0
grep -q "without --auth-token-file and --join-token-file" "$work/none.log" || fail "none: names"
refused client_only --listen 0.0.0.0:0 --auth-token-file "$work/token"
grep -q "without --join-token-file: anyone who can reach it could register workers" \
  "$work/client_only.log" || fail "client_only: does not say the WorkerService is open"

# 3. --insecure serves there, saying what is open.
serve insecure --listen 0.0.0.0:0 --insecure
grep -q "WARNING: no --auth-token-file and --join-token-file: anyone who can reach 0.0.0.0:0 can" \
  "$work/insecure.log" || fail "insecure: no warning"
listening_on "$SERVED_PORT" | grep -Eqx "(0\.0\.0\.0|\[::\]|\*):$SERVED_PORT" ||
  fail "insecure: listening on $(listening_on "$SERVED_PORT"), not every interface"

# 4. Both tokens: every interface by default is fine, and nothing to warn of.
serve secured --listen 0.0.0.0:0 --auth-token-file "$work/token" --join-token-file "$work/join"
! grep -q WARNING "$work/secured.log" || fail "secured: warned"

# 5. Without both token files the HTTP port defaults to loopback as well,
#    and the warning says where it serves.
if [ -z "$(listening_on 9400)" ]; then
  DEFAULT_HTTP=1 serve http_default --listen 127.0.0.1:0
  for address in $(listening_on 9400); do
    case $address in
      127.0.0.1:9400 | "[::ffff:127.0.0.1]:9400") ;;
      *) fail "http_default: HTTP listening on $address, expected 127.0.0.1:9400 only" ;;
    esac
  done
  [ -n "$(listening_on 9400)" ] || fail "http_default: nothing listens on 9400"
  grep -q "/metrics and /sd/workers (never authenticated) are served on 127.0.0.1:9400" \
    "$work/http_default.log" || fail "http_default: the warning does not name the HTTP address"
  kill "${pids[-1]}" && wait "${pids[-1]}" || true
else
  echo "port 9400 is taken here: skipping the default HTTP address case"
fi
echo "PASS"
