#!/usr/bin/env bash
# Why: Prometheus' own linter on the metric text the worker and the
# coordinator serve (metrics_exposition prints it): base units, `_total`
# on counters, help on every family. promtool prints nothing when the text
# is clean, one line per problem otherwise.
# Usage: metrics_conventions_test.sh METRICS_EXPOSITION PROMTOOL
set -euo pipefail
exposition=$1
promtool=$2
command -v "$promtool" >/dev/null ||
  { echo "promtool not found ($promtool): run scripts/install-deps.sh (package prometheus)" >&2; exit 1; }
text=$("$exposition")
for family in mixtrain_loss_scale mixtrain_loss_scale_min mixtrain_collective_duration_seconds_bucket \
  mixtrain_jobs mixtrain_workers; do
  grep -q "^$family{" <<<"$text" || { echo "no $family series in the exposition" >&2; exit 1; }
done
problems=$("$promtool" check metrics <<<"$text" 2>&1) || true
if [ -n "$problems" ]; then
  echo "promtool check metrics found problems:" >&2
  echo "$problems" >&2
  exit 1
fi
echo "metrics_conventions: $(grep -c '^# TYPE' <<<"$text") families pass promtool check metrics"
