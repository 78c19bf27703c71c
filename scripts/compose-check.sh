#!/usr/bin/env bash
# Why: docker-compose.yml is how most people will run a mixtrain cluster,
# and only a real Docker engine shows that it works: the image builds, the
# services come up healthy, jobs run across containers, scaling and a
# killed worker leave jobs finishing, Prometheus finds every target. This
# runs all of that as a user would and tears it down, printing how long
# each part took. It works where no registry answers: the Debian base
# images are made with debootstrap (scripts/debian-base-images.sh) and
# Prometheus from Debian's package; Grafana is left out, saying so, when
# its image cannot be had.
#
#   scripts/compose-check.sh [--keep]      (make compose-check)
#
# Needs a running Docker engine, docker-compose 1.29 or Compose v2, and
# debootstrap without a registry (scripts/install-deps.sh --docker).
# --keep leaves the stack up (project mixtrain-check) for a look.
set -euo pipefail

keep=0
case "${1:-}" in
  "") ;;
  --keep) keep=1 ;;
  *)
    echo "usage: $0 [--keep]" >&2
    exit 2
    ;;
esac

cd "$(dirname "$0")/.."
project=mixtrain-check
start_all=$(date +%s)
timings=()

phase_start=0
phase() { # NAME: starts timing the next phase
  phase_start=$(date +%s)
  phase_name=$1
  echo "== $1"
}
phase_done() {
  local took=$(($(date +%s) - phase_start))
  timings+=("$(printf '%-44s %5d s' "$phase_name" "$took")")
  echo "   ($took s)"
}
fail() {
  echo "compose-check: FAIL: $*" >&2
  exit 1
}

if ! docker info >/dev/null 2>&1; then
  fail "no Docker engine answers (install with scripts/install-deps.sh --docker, start dockerd)"
fi
if docker compose version >/dev/null 2>&1; then
  compose=(docker compose)
elif command -v docker-compose >/dev/null; then
  compose=(docker-compose)
else
  fail "neither 'docker compose' nor docker-compose is installed"
fi
compose+=(-p "$project" -f docker-compose.yml)
echo "compose-check: $(docker version --format 'Docker Engine {{.Server.Version}}'), ${compose[0]}" \
  "$("${compose[@]}" version --short 2>/dev/null || true)"

# --- images ---------------------------------------------------------------
phase "base images"
bash scripts/debian-base-images.sh
phase_done

have_or_pull() { # IMAGE: present, or pulled within a minute
  docker image inspect "$1" >/dev/null 2>&1 || timeout 60 docker pull -q "$1" >/dev/null 2>&1
}

phase "Prometheus and Grafana images"
prometheus_image=${MIXTRAIN_PROMETHEUS_IMAGE:-prom/prometheus:v3.13.0}
if have_or_pull "$prometheus_image"; then
  echo "Prometheus: $prometheus_image"
else
  prometheus_image=mixtrain-check/prometheus:debian
  echo "Prometheus: no registry gave the official image; building $prometheus_image from" \
    "Debian's package"
  docker build -q -t "$prometheus_image" - >/dev/null <<'EOF'
FROM debian:bookworm
RUN apt-get update && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus wget && \
    rm -rf /var/lib/apt/lists/*
ENTRYPOINT ["/usr/bin/prometheus"]
EOF
fi
export MIXTRAIN_PROMETHEUS_IMAGE=$prometheus_image
services=(coordinator worker prometheus)
grafana_image=${MIXTRAIN_GRAFANA_IMAGE:-grafana/grafana:12.4.0}
if have_or_pull "$grafana_image"; then
  echo "Grafana: $grafana_image"
  services+=(grafana)
else
  echo "Grafana: SKIPPED: $grafana_image cannot be had (no registry answers) and Debian has no" \
    "Grafana package; the rest of the stack is checked without it"
fi
phase_done

[[ -f deploy/secrets/auth-token ]] || bash scripts/make-deploy-secrets.sh

phase "build mixtrain:cpu"
"${compose[@]}" build coordinator >/tmp/compose-check-build.log 2>&1 ||
  { tail -30 /tmp/compose-check-build.log >&2; fail "the image did not build"; }
echo "image: $(docker image inspect -f '{{.Size}}' mixtrain:cpu | awk '{printf "%.0f MB", $1 / 1e6}')"
phase_done

teardown() {
  if [[ $keep == 1 ]]; then
    echo "compose-check: the stack is left up (--keep): ${compose[*]} down -v"
  else
    "${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
  fi
}
trap teardown EXIT
"${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true

# --- helpers ----------------------------------------------------------------
cid() { "${compose[@]}" ps -q "$1" | head -1; }
# The CLI inside the coordinator's container: MIXTRAIN_TOKEN_FILE there
# names the auth-token secret.
cli() { "${compose[@]}" exec -T coordinator mixtrain "$@"; }
json_field() { # FIELD: from the JSON on stdin
  python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}
await() { # SECONDS WHAT COMMAND...: until COMMAND succeeds
  local seconds=$1 what=$2
  shift 2
  local deadline=$(($(date +%s) + seconds))
  until "$@" >/dev/null 2>&1; do
    (($(date +%s) < deadline)) || fail "not within $seconds s: $what"
    sleep 1
  done
}
count_workers() { # STATE...: how many workers are in one of these states
  cli workers -o json | python3 -c '
import json, sys
print(sum(1 for w in json.load(sys.stdin) if w["state"] in sys.argv[1:]))' "$@"
}
workers_are() { [[ $(count_workers IDLE BUSY) == "$1" && $(count_workers JOINING) == 0 ]]; }
job_state() { cli status "$1" -o json | json_field state; }
job_is() { [[ $(job_state "$1") == "$2" ]]; }
job_step_at_least() { (($(cli status "$1" -o json | json_field step) >= $2)); }
healthy() { [[ $(docker inspect -f '{{.State.Health.Status}}' "$(cid "$1")") == healthy ]]; }
submit() { # EXTRA ARGS: submits the compose example, prints the job id
  cli -o json submit /tmp/compose-text.yaml "$@" | json_field id
}

# --- the stack --------------------------------------------------------------
phase "up: ${services[*]}, 3 workers"
"${compose[@]}" up -d --scale worker=3 "${services[@]}" >/tmp/compose-check-up.log 2>&1 ||
  { cat /tmp/compose-check-up.log >&2; fail "compose up failed"; }
for service in "${services[@]}"; do await 120 "$service healthy" healthy "$service"; done
await 60 "3 workers registered" workers_are 3
cli workers
phase_done

# The shared volume gets the data; the coordinator's container the spec.
coordinator=$(cid coordinator)
docker cp README.md "$coordinator:/srv/mixtrain/data/input.txt"
docker cp examples/compose-text.yaml "$coordinator:/tmp/compose-text.yaml"

phase "2-worker job to SUCCEEDED"
first=$(submit --set train.steps=60)
await 300 "job $first SUCCEEDED" job_is "$first" SUCCEEDED
cli status "$first" | head -12
phase_done

phase "scale to 4 and back to 2 mid-job"
second=$(submit --set train.steps=1500)
await 120 "job $second training" job_step_at_least "$second" 20
attempt=$(cli status "$second" -o json | json_field attempt)
"${compose[@]}" up -d --scale worker=4 --no-recreate "${services[@]}" >/dev/null 2>&1
await 60 "4 workers" workers_are 4
"${compose[@]}" up -d --scale worker=2 --no-recreate "${services[@]}" >/dev/null 2>&1
await 60 "2 workers" workers_are 2
echo "job $second: attempt $attempt -> $(cli status "$second" -o json | json_field attempt)" \
  "(a rank on a removed replica restarts it from its checkpoint)"
# Removed replicas deregister: none is left LOST.
[[ $(count_workers LOST) == 0 ]] || fail "scaled-down workers left LOST entries"
phase_done

phase "docker kill of a rank's worker, then resume"
await 120 "job $second running again" job_is "$second" RUNNING
await 120 "job $second past a checkpoint" job_step_at_least "$second" 120
victim=$(cli workers -o json | python3 -c '
import json, sys
print(next(w["hostname"] for w in json.load(sys.stdin) if w["state"] == "BUSY"))')
docker kill "$victim" >/dev/null
echo "killed worker container $victim"
await 90 "job $second requeued" job_is "$second" QUEUED
# `restart: unless-stopped` does not undo a kill; up starts it again.
"${compose[@]}" up -d --scale worker=2 --no-recreate "${services[@]}" >/dev/null 2>&1
await 120 "job $second resumed" job_is "$second" RUNNING
await 600 "job $second SUCCEEDED" job_is "$second" SUCCEEDED
cli status "$second" -o json | python3 -c '
import json, sys
for event in json.load(sys.stdin)["events"]:
    print("  ", event["state"], event["message"][:150])'
cli logs "$second" | grep "resuming from checkpoint" | tail -1 ||
  fail "job $second did not resume from a checkpoint"
phase_done

# --- monitoring -------------------------------------------------------------
phase "/metrics, /sd/workers, Prometheus targets"
address=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' \
  "$coordinator" | awk '{print $1}')
curl -sf "http://$address:9400/metrics" | grep -q '^mixtrain_jobs' ||
  fail "the coordinator's /metrics lacks mixtrain_jobs"
targets=$(curl -sf "http://$address:9400/sd/workers" |
  python3 -c 'import json, sys; print(sum(len(g["targets"]) for g in json.load(sys.stdin)))')
[[ $targets == 2 ]] || fail "/sd/workers lists $targets targets, not 2"
echo "/sd/workers: $targets targets"
prometheus_up() {
  curl -sf http://127.0.0.1:9090/api/v1/targets | python3 -c '
import json, sys
active = json.load(sys.stdin)["data"]["activeTargets"]
jobs = {t["labels"]["job"] for t in active if t["health"] == "up"}
sys.exit(0 if len([t for t in active if t["health"] == "up"]) >= 3 and len(jobs) >= 2 else 1)'
}
await 120 "Prometheus scraping the coordinator and 2 workers" prometheus_up
curl -sf http://127.0.0.1:9090/api/v1/targets | python3 -c '
import json, sys
for t in json.load(sys.stdin)["data"]["activeTargets"]:
    print("  ", t["labels"]["job"], t["scrapeUrl"], t["health"])'
phase_done

echo "== compose-check passed ($(($(date +%s) - start_all)) s in all)"
printf '%s\n' "${timings[@]}"
