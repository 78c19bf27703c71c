#!/usr/bin/env bash
# Why: the entrypoint of docker-compose.gpu.yml's gpu-host service, one
# container holding every GPU of a host. It starts one mixtrain-worker per
# GPU (--backend=cuda:I, metrics on port BASE+I), so the ranks of a job on
# that host share one container's namespaces and NCCL between them uses
# NVLink/PCIe peer access and shared memory, as between the ranks of one
# `mixtrain train --nproc N`; containers that each see one GPU cannot, and
# their NCCL falls back to sockets. When one worker exits, the others are
# stopped and the container exits with its status, for compose's restart
# policy to start the host afresh.
#
#   gpu-host-workers.sh [MIXTRAIN-WORKER ARGUMENTS...]
#
# Environment: MIXTRAIN_GPUS (default: the GPUs nvidia-smi -L lists),
# MIXTRAIN_METRICS_PORT_BASE (default 9401), MIXTRAIN_WORKER (default
# mixtrain-worker).
set -uo pipefail
worker=${MIXTRAIN_WORKER:-mixtrain-worker}
base=${MIXTRAIN_METRICS_PORT_BASE:-9401}
count=${MIXTRAIN_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
if ! [[ $count =~ ^[0-9]+$ ]] || [ "$count" -lt 1 ]; then
  echo "gpu-host-workers: no GPU visible (nvidia-smi -L lists none; MIXTRAIN_GPUS=${MIXTRAIN_GPUS:-unset})" >&2
  exit 2
fi
pids=()
stop_all() { kill -TERM "${pids[@]}" 2>/dev/null; }
trap 'stop_all' TERM INT
for ((gpu = 0; gpu < count; gpu++)); do
  "$worker" "$@" --backend="cuda:$gpu" --metrics-listen="0.0.0.0:$((base + gpu))" &
  pids+=($!)
  echo "gpu-host-workers: worker $((gpu + 1))/$count on cuda:$gpu (pid $!, metrics :$((base + gpu)))" >&2
done
wait -n
status=$?
stop_all
wait
exit $status
