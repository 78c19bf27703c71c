#!/bin/sh
# Why: GCC 12's ThreadSanitizer stops with "unexpected memory mapping" on
# kernels that randomize mmap with more bits (vm.mmap_rnd_bits 32) than
# its shadow layout allows. This runs the TSan test program as it is and,
# only if TSan reports that, once more with address randomization off
# (setarch -R) for that process alone.
# usage: run_under_tsan.sh PROGRAM [ARGS...]
output=$("$@" 2>&1)
status=$?
case $output in
  *"unexpected memory mapping"*)
    echo "run_under_tsan.sh: TSan cannot map its shadow here; running again under setarch -R"
    exec setarch "$(uname -m)" -R "$@" ;;
esac
printf '%s\n' "$output"
exit $status
