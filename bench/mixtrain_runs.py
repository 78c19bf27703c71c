"""Why: the training benchmarks (train_vs_pytorch.py, zero_step_bench.py)
both run `mixtrain train` on the example model and time whole steps from
its progress lines; this is that one runner.
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = os.path.join(ROOT, "examples", "shakespeare-char.yaml")
CORPUS = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt")
STEP_LINE = re.compile(r"^step (\d+)/\d+ .* (\d+) tok/s")


def run(command, env=None):
    """stdout of `command` run from the repository root; exits on failure."""
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                            env=None if env is None else {**os.environ, **env})
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({result.returncode}):\n"
                 f"{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return result.stdout


def train(build, scratch, name, steps, warmup, overrides, nproc=1):
    """(timed tokens/s, summary dict) of `mixtrain train` on the example
    model: tokens/s over the steps after `warmup` (every step trains as many
    tokens), without evaluation and with one checkpoint at the end."""
    summary_path = os.path.join(scratch, f"summary-{name}.json")
    data = CORPUS if os.path.isfile(CORPUS) else "builtin:demo"
    total = warmup + steps
    command = [os.path.join(build, "bin", "mixtrain"), "train", SPEC, "--nproc", str(nproc),
               "--set", f"data.train={data}", "--set", f"train.steps={total}",
               "--set", "train.warmup_steps=0", "--set", "train.eval_batches=0",
               "--set", f"checkpoint.every={total}",
               "--set", f"checkpoint.dir={os.path.join(scratch, 'ckpt-' + name)}",
               "--set", "resources.backend=cpu", "--summary-json", summary_path]
    for override in overrides:
        command += ["--set", override]
    out = run(command)
    rates = [float(m.group(2)) for m in map(STEP_LINE.match, out.splitlines())
             if m and int(m.group(1)) > warmup]
    if len(rates) != steps:
        sys.exit(f"mixtrain printed {len(rates)} timed step lines, expected {steps}:\n{out}")
    with open(summary_path) as f:
        summary = json.load(f)
    return steps / sum(1.0 / rate for rate in rates), summary
