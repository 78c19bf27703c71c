#!/usr/bin/python3
"""Why: what ZeRO costs and saves has to be measured, not read off the
paper. This trains the example GPT (examples/shakespeare-char.yaml, bf16)
with `mixtrain train --nproc N` for N = 1, 2, 4 at every ZeRO stage and
offload setting, keeping the global batch at 8 windows, and prints per
configuration: step time, tokens/s, rank 0's model-state bytes on the
device and the host, and the elements it sent per step next to the
ring's 2Psi(N-1)/N (stages 0-2) or 3Psi(N-1)/N (stage 3).

  bench/zero_step_bench.py [BUILD_DIR] [--steps N] [--warmup N] [--ranks 1,2,4]
"""
import argparse
import os
import tempfile

from mixtrain_runs import ROOT, train

GLOBAL_BATCH = 8
MODEL_STATE = ("params", "grads", "master_params", "optimizer_state")


def configurations(ranks):
    for n in ranks:
        for stage in range(4):
            yield n, stage, "none", "none"
            if stage > 0:
                yield n, stage, "cpu", "cpu" if stage == 3 else "none"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", nargs="?", default="build")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--ranks", default="1,2,4")
    args = parser.parse_args()
    build = os.path.abspath(os.path.join(ROOT, args.build))
    ranks = [int(n) for n in args.ranks.split(",")]
    print(f"example GPT, bf16, global batch {GLOBAL_BATCH} x 256 tokens, {args.steps} timed "
          f"steps after {args.warmup}, {os.cpu_count()} cores shared by the ranks")
    header = ("N", "stage", "offload opt/params", "step ms", "tok/s", "device MB", "host MB",
              "sent elements/step", "ring formula")
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    with tempfile.TemporaryDirectory(prefix="mixtrain-zero-bench-") as scratch:
        for n, stage, offload_optimizer, offload_params in configurations(ranks):
            name = f"n{n}-s{stage}-{offload_optimizer}-{offload_params}"
            rate, summary = train(build, scratch, name, args.steps, args.warmup,
                                  ["precision.compute=bf16", "precision.loss_scale=none",
                                   f"train.micro_batch={GLOBAL_BATCH // n}",
                                   f"zero.stage={stage}",
                                   f"zero.offload_optimizer={offload_optimizer}",
                                   f"zero.offload_params={offload_params}"], nproc=n)
            rank0 = summary["ranks"][0]
            memory = rank0["memory_bytes"]
            device = sum(memory["device"][key] for key in MODEL_STATE)
            host = sum(memory["host"][key] for key in ("params", "master_params",
                                                        "optimizer_state"))
            psi = summary["param_count"]
            ring = (3 if stage == 3 else 2) * psi * (n - 1) // n
            step_ms = 1e3 * GLOBAL_BATCH * 256 / rate
            print(f"| {n} | {stage} | {offload_optimizer}/{offload_params} | {step_ms:.0f} | "
                  f"{rate:.0f} | {device / 1e6:.1f} | {host / 1e6:.1f} | "
                  f"{rank0['comm_elements_per_step']} | {ring} |", flush=True)


if __name__ == "__main__":
    main()
