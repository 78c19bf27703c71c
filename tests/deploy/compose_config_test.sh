#!/usr/bin/env bash
# Why: docker-compose.yml, docker-compose.gpu.yml and the Dockerfiles are
# only useful if compose accepts them and they keep the rules the README
# and Prometheus rely on; this checks both without a Docker daemon.
#
#   tests/deploy/compose_config_test.sh SOURCE_DIR [DOCKER_COMPOSE [PYTHON]]
#
# 1. `docker-compose config -q` passes for docker-compose.yml alone and with
#    docker-compose.gpu.yml, run on a temporary copy of the two files with
#    secrets made by scripts/make-deploy-secrets.sh (compose needs the
#    secret and env files to exist; nothing is written to SOURCE_DIR).
# 2. The resolved configuration (`docker-compose config`, YAML, read with
#    PYTHON, default Debian's /usr/bin/python3, whose python3-yaml
#    docker-compose itself depends on) keeps the rules: scalable workers (no container_name, no
#    host ports), the coordinator named `coordinator` with /metrics and
#    /sd/workers on 9400 and gRPC published on 50051, one shared volume at
#    the same path holding the data and checkpoint roots, Prometheus and
#    Grafana mounting deploy/prometheus and deploy/grafana/{provisioning,
#    dashboards}, and in the GPU override one distinct NVIDIA GPU reserved
#    per CUDA worker service.
# 3. Both Dockerfiles exist, are multi-stage, and build with
#    scripts/install-deps.sh and CMake; the CUDA one from a devel image and
#    into the runtime image of the same CUDA version.
# Fails (never skips) when docker-compose is missing: install-deps.sh
# installs it.
set -euo pipefail

src=$(cd "${1:?usage: $0 SOURCE_DIR [DOCKER_COMPOSE [PYTHON]]}" && pwd)
compose=${2:-docker-compose}
python=${3:-/usr/bin/python3}

if ! command -v "$compose" >/dev/null 2>&1; then
  echo "FAIL: $compose not found (scripts/install-deps.sh installs docker-compose)" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$src/docker-compose.yml" "$src/docker-compose.gpu.yml" "$tmp/"
bash "$src/scripts/make-deploy-secrets.sh" "$tmp/deploy/secrets" >/dev/null
# Only the files given here, whatever the caller's environment says.
unset COMPOSE_FILE COMPOSE_PROFILES COMPOSE_PROJECT_NAME

run_config() {  # OUT FILE...
  local out=$1
  shift
  local args=()
  for f in "$@"; do args+=(-f "$tmp/$f"); done
  if ! (cd "$tmp" && "$compose" "${args[@]}" config -q); then
    echo "FAIL: $compose config -q of $*" >&2
    exit 1
  fi
  (cd "$tmp" && "$compose" "${args[@]}" config) >"$out"
  echo "ok: $compose config -q ($*)"
}
run_config "$tmp/cpu.yml" docker-compose.yml
run_config "$tmp/gpu.yml" docker-compose.yml docker-compose.gpu.yml
# As a user pinning the threads of every rank runs it.
MIXTRAIN_WORKER_THREADS=3 run_config "$tmp/pinned.yml" docker-compose.yml docker-compose.gpu.yml

unset MIXTRAIN_WORKER_THREADS
"$python" - "$src" "$tmp/cpu.yml" "$tmp/gpu.yml" "$tmp/pinned.yml" <<'EOF'
import os, re, sys
import yaml

src, cpu_file, gpu_file, pinned_file = sys.argv[1:5]
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def flag(args, name):
    """The value of --name=V or --name V in an argv list, else None."""
    args = [str(a) for a in args or []]
    for i, a in enumerate(args):
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
        if a == name and i + 1 < len(args):
            return args[i + 1]
    return None


def mounts(service):
    """(source, target) of each volume, for the short and the long syntax."""
    out = []
    for v in service.get("volumes", []):
        if isinstance(v, dict):
            out.append((str(v.get("source", "")), v.get("target")))
        else:
            parts = v.split(":")
            out.append((parts[0], parts[1] if len(parts) > 1 else parts[0]))
    return out


def published(service):
    """(published, target) of each port mapping."""
    out = []
    for p in service.get("ports", []):
        if isinstance(p, dict):
            out.append((str(p.get("published", "")), str(p.get("target"))))
        else:
            parts = str(p).split(":")
            out.append((parts[-2] if len(parts) > 1 else "", parts[-1]))
    return out


def mounts_dir(service, rel, target):
    return any(s.rstrip("/").endswith("/" + rel) and t == target for s, t in mounts(service))


cpu = yaml.safe_load(open(cpu_file))["services"]
gpu = yaml.safe_load(open(gpu_file))["services"]
pinned = yaml.safe_load(open(pinned_file))["services"]


def environment(service):
    env = service.get("environment") or {}
    if isinstance(env, dict):
        return {k: None if v is None else str(v) for k, v in env.items()}
    return dict((e.split("=", 1) + [None])[:2] for e in env)

# Scalable workers: a fixed name or host port makes `--scale worker=N` fail.
for config, label in ((cpu, "docker-compose.yml"), (gpu, "with docker-compose.gpu.yml")):
    for name, service in config.items():
        if name.startswith("worker"):
            check("container_name" not in service, f"{label}: {name} has no container_name")
            check(not service.get("ports"), f"{label}: {name} maps no host port")

# Workers scaled onto one host share its cores, as the coordinator sizes
# each rank's threads from the workers on that host (issue 30: a fixed
# --threads=2 per replica made 3 workers on 2 cores 30x slower, and a
# `cpus` above the host's cores stops them from starting). So no worker
# fixes --threads or cpus; MIXTRAIN_WORKER_THREADS reaches it from the
# host's environment when set. The address a worker advertises must be its
# own: no --data-address or --advertise-host that all replicas would share.
for config, label in ((cpu, "docker-compose.yml"), (gpu, "with docker-compose.gpu.yml")):
    for name, service in config.items():
        if not name.startswith("worker") and name != "gpu-host":
            continue
        argv = (service.get("entrypoint") or []) + (service.get("command") or [])
        check(flag(argv, "--threads") is None, f"{label}: {name} leaves --threads unset")
        check("cpus" not in service, f"{label}: {name} sets no cpus cap")
for name, service in pinned.items():
    if name.startswith("worker") or name == "gpu-host":
        check(environment(service).get("MIXTRAIN_WORKER_THREADS") == "3",
              f"{name} gets MIXTRAIN_WORKER_THREADS from the host's environment")
        for fixed in ("--data-address", "--advertise-host"):
            check(flag(argv, fixed) is None, f"{label}: {name} leaves {fixed} to each replica")

# The coordinator: prometheus.yml scrapes coordinator:9400 and discovers
# workers at http://coordinator:9400/sd/workers; the host CLI uses 50051.
coordinator = cpu.get("coordinator")
check(coordinator is not None, "a service named coordinator")
coordinator = coordinator or {}
command = coordinator.get("command") or []
check((flag(command, "--http") or "").endswith(":9400"), "coordinator --http on port 9400")
check((flag(command, "--listen") or "").endswith(":50051"), "coordinator --listen on port 50051")
check(("50051", "50051") in published(coordinator), "coordinator publishes 50051 on the host")
# `mixtrain` run inside the coordinator's container finds the clients' token.
check(environment(coordinator).get("MIXTRAIN_TOKEN_FILE") == "/run/secrets/auth-token",
      "coordinator's MIXTRAIN_TOKEN_FILE is its auth-token secret")

# One volume, mounted at the same path by the coordinator and the workers,
# holds the data root and the checkpoint root.
worker = cpu.get("worker", {})
shared = [(s, t) for s, t in mounts(coordinator) if (s, t) in mounts(worker) and not s.startswith("/")]
check(len(shared) == 1, "coordinator and worker share one named volume at the same path")
if shared:
    root = shared[0][1].rstrip("/") + "/"
    for option in ("--data-root", "--checkpoint-root"):
        value = flag(command, option) or ""
        check(value.startswith(root), f"coordinator {option} ({value}) is on the shared volume {root}")

prometheus, grafana = cpu.get("prometheus", {}), cpu.get("grafana", {})
check(mounts_dir(prometheus, "deploy/prometheus", "/etc/prometheus"),
      "prometheus mounts deploy/prometheus at /etc/prometheus")
check(("9090", "9090") in published(prometheus), "prometheus on host port 9090")
check(mounts_dir(grafana, "deploy/grafana/provisioning", "/etc/grafana/provisioning"),
      "grafana mounts deploy/grafana/provisioning at /etc/grafana/provisioning")
check(mounts_dir(grafana, "deploy/grafana/dashboards", "/etc/grafana/dashboards"),
      "grafana mounts deploy/grafana/dashboards at /etc/grafana/dashboards")
check(("3000", "3000") in published(grafana), "grafana on host port 3000")
for name in ("prometheus", "grafana"):
    image = cpu.get(name, {}).get("image", "")
    check(re.search(r":v?\d+\.\d+\.\d+$", image) is not None, f"{name} image pinned ({image})")

# GPU override: `worker` runs the CUDA image with the cuda backend on one
# GPU of its own; gpu-host holds every GPU, shares the host's IPC
# namespace and starts a worker per GPU through gpu-host-workers.sh, which
# the CUDA image carries.
def nvidia_devices(service):
    devices = (((service.get("deploy") or {}).get("resources") or {}).get("reservations") or {}).get("devices") or []
    return [d for d in devices if d.get("driver") == "nvidia" and "gpu" in (d.get("capabilities") or [])]

worker = gpu.get("worker", {})
check(worker != {}, "the GPU override keeps the worker service")
ids = [str(i) for d in nvidia_devices(worker) for i in (d.get("device_ids") or [])]
check(ids == ["0"], f"worker reserves exactly GPU 0 ({ids})")
check(worker.get("build", {}).get("dockerfile") == "deploy/Dockerfile.cuda", "worker builds deploy/Dockerfile.cuda")
argv = (worker.get("entrypoint") or []) + (worker.get("command") or [])
check(flag(argv, "--backend") == "cuda", "worker runs mixtrain-worker --backend=cuda")
check(not any(n.startswith("worker-gpu") for n in gpu), "no per-GPU worker services (gpu-host replaces them)")

host = gpu.get("gpu-host", {})
check(host != {}, "the GPU override offers the gpu-host service")
check([d.get("count") for d in nvidia_devices(host)] == ["all"], "gpu-host reserves every GPU (count: all)")
check(host.get("ipc") == "host", "gpu-host shares the host's IPC namespace")
check(host.get("image") == worker.get("image"), "gpu-host runs the worker's CUDA image")
argv = host.get("entrypoint") or []
check(argv[:1] == ["gpu-host-workers.sh"], f"gpu-host starts gpu-host-workers.sh ({argv[:1]})")
check(flag(argv, "--coordinator") == "coordinator:50051", "gpu-host's workers join the coordinator")
check(flag(argv, "--backend") is None, "gpu-host leaves --backend to gpu-host-workers.sh")
check("gpu-host" in (host.get("profiles") or []), "gpu-host starts only with its profile")
check("gpu-host-workers.sh" in open(os.path.join(src, "deploy/Dockerfile.cuda")).read(),
      "deploy/Dockerfile.cuda installs gpu-host-workers.sh")

# Dockerfiles: the ones compose builds exist, are multi-stage and build
# with the project's own install script and CMake.
dockerfiles = {s["build"]["dockerfile"] for c in (cpu, gpu) for s in c.values() if "build" in s}
check(dockerfiles == {"deploy/Dockerfile.cpu", "deploy/Dockerfile.cuda"},
      f"compose builds deploy/Dockerfile.cpu and deploy/Dockerfile.cuda ({sorted(dockerfiles)})")
for rel in ("deploy/Dockerfile.cpu", "deploy/Dockerfile.cuda"):
    path = os.path.join(src, rel)
    check(os.path.isfile(path), f"{rel} exists")
    if not os.path.isfile(path):
        continue
    text = open(path).read()
    froms = re.findall(r"^FROM\s+(\S+)", text, re.M)
    check(len(froms) >= 2, f"{rel} is multi-stage ({froms})")
    check(re.search(r"^RUN .*scripts/install-deps\.sh --build-only", text, re.M) is not None,
          f"{rel} runs scripts/install-deps.sh --build-only")
    check(re.search(r"cmake -S ", text) and re.search(r"cmake --build ", text)
          and re.search(r"cmake --install ", text), f"{rel} configures, builds and installs with cmake")
    if rel.endswith("cuda"):
        build = re.match(r"nvidia/cuda:([\d.]+)-devel-(\S+)$", froms[0]) if froms else None
        final = re.match(r"nvidia/cuda:([\d.]+)-runtime-(\S+)$", froms[-1]) if froms else None
        check(build is not None and final is not None and build.groups() == final.groups(),
              f"{rel}: nvidia/cuda devel to the matching runtime ({froms[0] if froms else ''} -> "
              f"{froms[-1] if froms else ''})")

print(f"{len(failures)} failed" if failures else "all deploy compose checks passed")
sys.exit(1 if failures else 0)
EOF
