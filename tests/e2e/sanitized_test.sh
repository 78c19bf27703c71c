#!/usr/bin/env bash
# Why: a heap corruption in a preempted rank aborted 1 CI run in 8 (issue
# 29), and a rank that dies of one is restarted by the service and may
# still end the job as SUCCEEDED. This runs an e2e test script against the
# binaries of the sanitized build (make test builds them in
# build-sanitize/ with AddressSanitizer and UBSan) with every process's
# report written to a file, and fails when any process wrote one, whatever
# the script itself concluded.
#   sanitized_test.sh SANITIZED_BIN_DIR SCRIPT [SCRIPT_ARGS...]
set -uo pipefail
bin=$1 script=$2
shift 2
reports=$(mktemp -d)
trap 'rm -rf "$reports"' EXIT
# Each process writes <kind>.<pid> at its first finding and stops there
# (UBSan as well: -fno-sanitize-recover). Leaks are checked at every
# normal exit: a task process that returns after a preemption included.
export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$(dirname "$0")/lsan_suppressions.txt:print_suppressions=0"
bash "$script" "$bin" "$@"
status=$?
found=0
for report in "$reports"/*; do
  [ -e "$report" ] || continue
  found=1
  echo "==== sanitizer report $(basename "$report")" >&2
  head -n 120 "$report" >&2
done
if [ $found -eq 1 ]; then
  echo "FAIL: the sanitizers reported the findings above (the script exited $status)" >&2
  exit 1
fi
exit $status
