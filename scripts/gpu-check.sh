#!/usr/bin/env bash
# Why: the CUDA backend compiles everywhere but only runs where there is a
# GPU, and such machines usually have CUDA, CMake, Ninja and PyTorch but no
# make, apt, GoogleTest, gRPC or oneDNN. This script builds just the engine
# there (MIXTRAIN_ENGINE_ONLY, CUDA required) and runs its tests: the
# backend parity suite then checks every CUDA op against the CPU backend,
# again under compute-sanitizer's memcheck and racecheck, and the NCCL test
# runs under initcheck. Last, bench/gpu_train_bench.py trains on the GPU:
# the first steps against the CPU backend's, and GPT-2 124M's tokens/s and
# MFU next to PyTorch's (GPU_CHECK_BENCH=0 skips it). Every log lands in
# one directory to bring back.
#
#   scripts/gpu-deps.sh          (here, once: GoogleTest sources, nlohmann-json headers into third_party/)
#   scripts/gpu-check.sh [RESULTS_DIR]      (there; default ./gpu-results)
#
# Environment: MIXTRAIN_CMAKE_ARGS adds configure arguments (for example
# -DCMAKE_CUDA_ARCHITECTURES=90); BUILD_DIR overrides build-gpu; JOBS the
# build parallelism; GTEST_SOURCE_DIR overrides third_party/googletest;
# GPU_CHECK_STOP_AFTER=configure stops once configured (what
# tests/e2e/gpu_check_configure_test.sh runs).
# It refuses at once, before building anything, on a machine where
# nvidia-smi lists no GPU, and fails when GoogleTest is neither installed
# nor in third_party/googletest (a run without the CUDA parity suite
# proves nothing). NCCL is taken from the CUDA toolkit or, failing that,
# from PyTorch's site-packages/nvidia/nccl; the summary says which.
# Exit status: 0 when the build, every test and the CUDA parity cases
# passed (sanitizers included); 1 when any of them failed; 2 when this
# machine has no usable GPU.
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
started=$(date +%s)

note() { echo "gpu-check: $*" | tee -a "$summary"; }
fail() { note "FAIL: $*"; status=1; }
elapsed() { echo "$(( $(date +%s) - started )) s"; }

# ---- a usable GPU first: nothing is worth building without one ------------------
gpus=$(nvidia-smi -L 2>&1)
if [ $? -ne 0 ] || ! grep -q '^GPU ' <<<"$gpus"; then
  note "FAIL: no usable GPU here (nvidia-smi -L: ${gpus:-no output}); nothing was built"
  exit 2
fi
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
note "$(grep -c '^GPU ' <<<"$gpus") GPU(s): $(grep '^GPU ' <<<"$gpus" | head -1); driver ${driver:-unknown}"

# ---- what this machine has ----------------------------------------------------
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -a)"
  echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
  nvidia-smi
  command -v nvcc >/dev/null && nvcc --version
  [ -x /usr/local/cuda/bin/nvcc ] && /usr/local/cuda/bin/nvcc --version
  cmake --version
  c++ --version
} >"$results/environment.log" 2>&1

# ---- configure ------------------------------------------------------------------
configure_args=(-S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMIXTRAIN_ENGINE_ONLY=ON
                -DMIXTRAIN_CUDA=ON -DMIXTRAIN_BUILD_TESTS=ON -DMIXTRAIN_BUILD_BENCH=ON)
# The host emulation of CUDA is for machines without a GPU.
configure_args+=(-DMIXTRAIN_CUDA_EMULATION=OFF)
if [ ! -f "$build/CMakeCache.txt" ] && ! command -v make >/dev/null; then
  if command -v ninja >/dev/null; then
    configure_args+=(-G Ninja)
  else
    note "FAIL: neither make nor ninja is installed; nothing was built"
    exit 1
  fi
fi
gtest_note="installed GoogleTest"
gtest_sources=${GTEST_SOURCE_DIR:-$root/third_party/googletest}
if [ -f "$gtest_sources/CMakeLists.txt" ]; then
  configure_args+=(-DMIXTRAIN_GTEST_SOURCE_DIR="$gtest_sources")
  gtest_note="GoogleTest built from $gtest_sources"
fi
# shellcheck disable=SC2206  # word splitting of the extra arguments is wanted
extra_args=(${MIXTRAIN_CMAKE_ARGS:-})
log=$results/configure.log
if ! cmake "${configure_args[@]}" "${extra_args[@]}" >"$log" 2>&1; then
  if grep -Eq 'Could NOT find GTest|provided by "GTest"' "$log"; then
    note "FAIL: GoogleTest not found, so the CUDA parity suite cannot be built."
    note "      Run scripts/gpu-deps.sh where Debian's googletest is installed and bring"
    note "      third_party/googletest along."
  else
    note "FAIL: configure failed, see configure.log"
  fi
  exit 1
fi
grep -q "CUDA backend ON" "$log" || fail "configure did not enable the CUDA backend (see configure.log)"
nccl=$(grep -o 'NCCL found ([^)]*)' "$log" | head -1)
note "configured $build with $(grep -o 'CMAKE_GENERATOR:INTERNAL=.*' "$build/CMakeCache.txt" | cut -d= -f2), $gtest_note; ${nccl:-NCCL not found: GPU collectives OFF, comm_nccl_test not built}"
[ "${GPU_CHECK_STOP_AFTER:-}" = configure ] && exit $status

# ---- build ----------------------------------------------------------------------
start=$(date +%s)
if cmake --build "$build" -j "$jobs" >"$results/build.log" 2>&1; then
  note "built in $(( $(date +%s) - start )) s with -j $jobs"
else
  fail "build failed, see build.log"
  exit 1
fi
grep -i "warning" "$results/build.log" >"$results/build-warnings.log" || true
note "$(wc -l <"$results/build-warnings.log") warning lines (build-warnings.log)"

# ---- tests ----------------------------------------------------------------------
if ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 300 \
    --output-junit "$results/ctest-junit.xml" >"$results/ctest.log" 2>&1; then
  note "ctest passed ($(elapsed) so far)"
else
  fail "ctest failed, see ctest.log"
fi

# The CUDA parity cases alone, plainly and under compute-sanitizer, where a
# skip means no usable GPU: an error here.
parity=$build/tests/unit/backend/backend_parity_test
nccl_test=$build/tests/unit/comm/comm_nccl_test
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# run_checked NAME COMMAND...: runs COMMAND into NAME.log and judges it.
run_checked() {
  local name=$1
  shift
  timeout 600 "$@" >"$results/$name.log" 2>&1
  local rc=$?
  if grep -q "SKIPPED" "$results/$name.log"; then
    fail "$name: cases were skipped: this process sees no usable CUDA device"
  elif [ $rc -ne 0 ]; then
    fail "$name failed (exit $rc), see $name.log"
  else
    note "$name passed ($(elapsed) so far)"
  fi
}
if [ ! -x "$parity" ]; then
  fail "backend_parity_test was not built"
else
  run_checked backend-parity-cuda "$parity" --gtest_filter='*/cuda'
  if [ -x "$sanitizer" ]; then
    run_checked parity-memcheck "$sanitizer" --tool memcheck --error-exitcode 99 \
      "$parity" --gtest_filter='*/cuda'
    run_checked parity-racecheck "$sanitizer" --tool racecheck --error-exitcode 99 \
      "$parity" --gtest_filter='*/cuda'
    if [ -x "$nccl_test" ]; then
      run_checked nccl-initcheck "$sanitizer" --tool initcheck --error-exitcode 99 "$nccl_test" \
        --gtest_filter='-*Reserve*'
    fi
  else
    fail "compute-sanitizer not found: memcheck and racecheck did not run"
  fi
fi
# The device memory NCCL and the runtime hold beside the pool, against the
# reserve the planner counts for them (engine/backend/device_reserve.h).
if [ -x "$nccl_test" ]; then
  run_checked nccl-reserve "$nccl_test" --gtest_filter='*Reserve*'
  grep -h 'outside the pool' "$results/nccl-reserve.log" | tee -a "$summary"
fi

# ---- training on the GPU -----------------------------------------------------------
if [ "${GPU_CHECK_BENCH:-1}" = 1 ]; then
  python=$(command -v python3 || echo /usr/bin/python3)
  timeout 300 "$python" "$root/bench/gpu_train_bench.py" "$build" >"$results/train-bench.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    fail "gpu_train_bench failed (exit $rc), see train-bench.log"
  else
    note "gpu_train_bench passed ($(elapsed) so far)"
  fi
  grep -E '^(compare|mixtrain:)' "$results/train-bench.log" | tee -a "$summary"
fi

# ---- which GPU paths this machine could run -----------------------------------------
# Each path needs a GPU architecture and a toolkit; the table says which of
# them the tests above exercised here. An H100/H200 (sm_90) never runs the
# MXFP8 GEMM: those tests took the dequantize-to-bf16 path instead.
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
toolkit=$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | cut -d' ' -f2)
toolkit=${toolkit:-$(/usr/local/cuda/bin/nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | cut -d' ' -f2)}
at_least() { [ -n "$1" ] && [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }
path_row() { # PATH NEEDS_SM NEEDS_CUDA
  local ran="ran"
  if [ -z "$cap" ] || [ "$cap" -lt "$2" ]; then
    ran="not run: this GPU is sm_${cap:-?}, below sm_$2"
  elif ! at_least "$toolkit" "$3"; then
    ran="not run: CUDA ${toolkit:-?} is older than $3"
  fi
  printf '  %-34s sm_%-4s CUDA %-5s %s\n' "$1" "$2" "$3" "$ran" | tee -a "$summary"
}
note "GPU paths (sm_${cap:-?}, CUDA ${toolkit:-?}):"
printf '  %-34s %-7s %-10s %s\n' path needs "" "here" | tee -a "$summary"
path_row "bf16/fp16 GEMMs, fused epilogues" 80 11.8
path_row "fp8 per-tensor GEMM (cuBLASLt)" 89 11.8
path_row "MXFP8 block-scaled GEMM" 100 12.8

note "done in $(elapsed); results in $results"
exit $status
