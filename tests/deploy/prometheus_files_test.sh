#!/usr/bin/env bash
# Why: deploy/prometheus as Prometheus itself reads it: prometheus.yml and
# the rule files it names are valid, and every alert in alerts.yml fires,
# and stays quiet, as the promtool unit tests in alerts_test.yml expect.
# Usage (from the source root): prometheus_files_test.sh PROMTOOL
set -euo pipefail
promtool=$1
command -v "$promtool" >/dev/null ||
  { echo "promtool not found ($promtool): run scripts/install-deps.sh (package prometheus)" >&2; exit 1; }
"$promtool" check config deploy/prometheus/prometheus.yml
"$promtool" check rules deploy/prometheus/alerts.yml
"$promtool" test rules deploy/prometheus/alerts_test.yml
