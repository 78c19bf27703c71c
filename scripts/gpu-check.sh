#!/usr/bin/env bash
# Why: the CUDA backend compiles everywhere but only runs where there is a
# GPU, and such machines usually have CUDA, CMake and a C++ compiler but no
# apt, gRPC, abseil or oneDNN. This script builds just the engine there
# (MIXTRAIN_ENGINE_ONLY, CUDA required), runs ctest (the backend parity
# suite then checks every CUDA op against the CPU backend) and whatever
# benchmarks got built, and leaves every log in one directory to bring back.
#
#   scripts/gpu-check.sh [RESULTS_DIR]      (default ./gpu-results)
#
# Environment: MIXTRAIN_CMAKE_ARGS adds configure arguments (for example
# -DGTest_DIR=... or -DCMAKE_CUDA_ARCHITECTURES=90); BUILD_DIR overrides
# build-gpu; JOBS overrides the build parallelism.
# It refuses at once, before building anything, on a machine where
# nvidia-smi lists no GPU, and fails when GoogleTest is missing (a run
# without the CUDA parity suite proves nothing). Without Google Benchmark
# only convert_bench is left out, by CMake itself.
# Exit status: 0 when the build, every test and the CUDA parity cases
# passed; 1 when any of them failed; 2 when this machine has no usable GPU.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
results=${1:-./gpu-results}
mkdir -p "$results"
results=$(cd "$results" && pwd)
build=${BUILD_DIR:-$root/build-gpu}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 4)}
summary=$results/summary.txt
: >"$summary"
status=0

note() { echo "gpu-check: $*" | tee -a "$summary"; }
fail() { note "FAIL: $*"; status=1; }

# ---- a usable GPU first: nothing is worth building without one ------------------
gpus=$(nvidia-smi -L 2>&1)
if [ $? -ne 0 ] || ! grep -q '^GPU ' <<<"$gpus"; then
  note "FAIL: no usable GPU here (nvidia-smi -L: ${gpus:-no output}); nothing was built"
  exit 2
fi
note "$(grep -c '^GPU ' <<<"$gpus") GPU(s): $(grep '^GPU ' <<<"$gpus" | head -1)"

# ---- what this machine has ----------------------------------------------------
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -a)"
  echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
  command -v nvidia-smi >/dev/null && nvidia-smi
  command -v nvcc >/dev/null && nvcc --version
  [ -x /usr/local/cuda/bin/nvcc ] && /usr/local/cuda/bin/nvcc --version
  cmake --version
  c++ --version
} >"$results/environment.log" 2>&1

# ---- configure (dropping the tests when GoogleTest is missing) ------------------
configure_args=(-S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
                -DMIXTRAIN_ENGINE_ONLY=ON -DMIXTRAIN_CUDA=ON)
# shellcheck disable=SC2206  # word splitting of the extra arguments is wanted
extra_args=(${MIXTRAIN_CMAKE_ARGS:-})
tests=ON
configured=0
for attempt in 1 2; do
  log=$results/configure-$attempt.log
  if cmake "${configure_args[@]}" -DMIXTRAIN_BUILD_TESTS=$tests -DMIXTRAIN_BUILD_BENCH=ON \
      "${extra_args[@]}" >"$log" 2>&1; then
    configured=1
    break
  fi
  if [ $tests = ON ] && grep -Eq 'Could NOT find GTest|provided by "GTest"' "$log"; then
    tests=OFF
    fail "GoogleTest not found: the tests (the CUDA parity suite included) are NOT built."
    note "      Build GoogleTest from source and pass MIXTRAIN_CMAKE_ARGS=-DGTest_DIR=<prefix>/lib/cmake/GTest."
  else
    break
  fi
done
if [ $configured = 0 ]; then
  fail "configure failed, see $log"
  exit 1
fi
grep -q "CUDA backend ON" "$log" || fail "configure did not enable the CUDA backend (see $log)"
note "configured $build (tests $tests)"

# ---- build ----------------------------------------------------------------------
start=$(date +%s)
if cmake --build "$build" -j "$jobs" >"$results/build.log" 2>&1; then
  note "built in $(( $(date +%s) - start )) s"
else
  fail "build failed, see build.log"
  exit 1
fi
grep -i "warning" "$results/build.log" >"$results/build-warnings.log" || true
note "$(wc -l <"$results/build-warnings.log") warning lines (build-warnings.log)"

# ---- tests ----------------------------------------------------------------------
if [ $tests = ON ]; then
  if ctest --test-dir "$build" --output-on-failure -j "$jobs" \
      --output-junit "$results/ctest-junit.xml" >"$results/ctest.log" 2>&1; then
    note "ctest passed"
  else
    fail "ctest failed, see ctest.log"
  fi
  # The CUDA parity cases alone, where a skip means no usable GPU: an error here.
  parity=$build/tests/unit/backend/backend_parity_test
  if [ -x "$parity" ]; then
    "$parity" --gtest_filter='*/cuda*' --gtest_output="xml:$results/backend-parity-cuda.xml" \
      >"$results/backend-parity-cuda.log" 2>&1
    parity_status=$?
    if grep -q "SKIPPED" "$results/backend-parity-cuda.log"; then
      fail "CUDA parity cases were skipped: this process sees no usable CUDA device"
    elif [ $parity_status -ne 0 ]; then
      fail "CUDA parity cases failed, see backend-parity-cuda.log"
    else
      note "CUDA parity cases passed"
    fi
  else
    fail "backend_parity_test was not built"
  fi
fi

# ---- benchmarks (never pass/fail, only numbers) ---------------------------------
if [ -d "$build/bench" ]; then
  for bin in "$build"/bench/*; do
    if [ ! -f "$bin" ] || [ ! -x "$bin" ]; then continue; fi
    name=$(basename "$bin")
    args=()
    if "$bin" --help 2>&1 | grep -q "benchmark_filter"; then
      args=(--benchmark_out="$results/bench-$name.json" --benchmark_out_format=json)
    fi
    if timeout 1800 "$bin" "${args[@]}" >"$results/bench-$name.log" 2>&1; then
      note "benchmark $name done (bench-$name.log)"
    else
      note "benchmark $name exited with an error (bench-$name.log)"
    fi
  done
fi

note "results in $results"
exit $status
