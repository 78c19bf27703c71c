#!/usr/bin/env bash
# Why: `make bench` runs every benchmark of the build in one go, each
# printing its own table next to its peer (raw oneDNN for GEMMs, the scalar
# loop for conversions, nccl-tests' bandwidth terms for collectives, PyTorch
# for training), so README's figures are one command away.
#
#   bench/run_all.sh [BUILD_DIR]     (default build)
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."

echo "== machine: $("$build/bin/mixtrain" env 2>/dev/null | sed -n 's/^cpu features *//p') ($(nproc) cores)"
echo
echo "== GEMM: Backend::matmul vs raw oneDNN (GFLOP/s)"
"$build/bench/gemm_bench"
if [ -x "$build/bench/convert_bench" ]; then
  echo
  echo "== bulk conversion throughput (bytes read + written per second)"
  "$build/bench/convert_bench" --benchmark_min_time=0.3
fi
echo
echo "== compute fp8 vs bf16 on the CPU backend (tokens/s of mixtrain train)"
/usr/bin/python3 bench/fp8_step_bench.py "$build"
if [ -x "$build/bench/comm_bench" ]; then
  echo
  echo "== Gloo collectives over loopback, N local ranks (nccl-tests algbw/busbw)"
  "$build/bench/comm_bench" --ranks 1,2,4
  echo
  echo "== ZeRO: step time, model-state memory and traffic per stage, N local ranks"
  /usr/bin/python3 bench/zero_step_bench.py "$build"
fi
if [ -x "$build/bench/coordinator_load" ]; then
  echo
  echo "== coordinator: 500 submissions from 8 concurrent clients"
  "$build/bench/coordinator_load" "$build/bin"
fi
if [ -x "$build/bench/scheduler_scale" ]; then
  echo
  echo "== scheduler: 100,000 finished or 10,000 queued jobs stored vs none, 200 fake workers over gRPC"
  "$build/bench/scheduler_scale" "$build/bin"
fi
echo
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "== training throughput: mixtrain train vs PyTorch (several minutes)"
  /usr/bin/python3 bench/train_vs_pytorch.py "$build"
  echo
  echo "== activation checkpointing: memory and step time, mixtrain and PyTorch (3 minutes)"
  /usr/bin/python3 bench/activation_checkpointing_bench.py "$build"
else
  echo "== training throughput vs PyTorch: skipped (/usr/bin/python3 cannot import torch)"
fi
