#!/usr/bin/python3
"""Why: GEMM speed is not training speed. This trains the example GPT
(examples/shakespeare-char.yaml: 6 layers, 6 heads, dim 384, seq_len 256,
micro_batch 8, vocab 256, AdamW, clip 1.0) with `mixtrain train` and with
PyTorch (bench/torch_gpt_train.py) on this machine, in fp32 and bf16, and
prints tokens/s, the ratio, and model FLOP/s (6 * params * tokens/s) next to
the best GEMM rate bench/gemm_bench measured for the same dtype.

Both sides time whole steps (sampling, forward, backward, clipping, AdamW)
after untimed warm-up steps. For mixtrain that is the per-step "tok/s" of
the progress lines (no evaluation, no checkpoint) after WARMUP steps,
combined as total tokens / total seconds; the summary JSON's
tokens_per_second, which also counts the warm-up steps, is printed beside
it. PyTorch gets its own, smaller step counts (see torch_gpt_train.py),
because with Debian's reference BLAS one of its steps takes most of a minute
on two cores; the notes name the BLAS it used (set LD_LIBRARY_PATH to try
another).

  bench/train_vs_pytorch.py [BUILD_DIR] [--steps N] [--warmup N]
                            [--torch-steps N] [--torch-warmup N]
"""
import argparse
import json
import os
import sys
import tempfile

from mixtrain_runs import CORPUS, ROOT, run, train


def mixtrain(build, precision, steps, warmup, scratch):
    """(timed tokens/s, summary tokens/s, param_count) of `mixtrain train`."""
    timed, summary = train(build, scratch, precision, steps, warmup,
                           [f"precision.compute={precision}", "precision.loss_scale=none"])
    return timed, summary["tokens_per_second"], summary["param_count"]


def pytorch(precision, data, steps, warmup):
    """The key=value fields that bench/torch_gpt_train.py prints."""
    command = [sys.executable, os.path.join(ROOT, "bench", "torch_gpt_train.py"),
               "--precision", precision, "--steps", str(steps), "--warmup", str(warmup)]
    out = run(command + (["--data", data] if os.path.isfile(data) else []))
    return dict(field.split("=", 1) for field in out.split()[1:])


def gemm_peak(build, precision):
    """The best Backend::matmul GFLOP/s of gemm_bench for `precision`."""
    rows = json.loads(run([os.path.join(build, "bench", "gemm_bench"), "--json",
                           "--filter", precision]))
    best = max(rows, key=lambda row: row["ours_gflops"])
    return best["ours_gflops"], best["shape"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", nargs="?", default="build")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--torch-steps", type=int, default=2)
    parser.add_argument("--torch-warmup", type=int, default=1)
    args = parser.parse_args()
    build = os.path.abspath(os.path.join(ROOT, args.build))
    data = CORPUS if os.path.isfile(CORPUS) else "builtin:demo"

    print(f"model: examples/shakespeare-char.yaml, data {os.path.relpath(data, ROOT)}, "
          f"mixtrain {args.steps} timed steps after {args.warmup} warm-up, {os.cpu_count()} cores"
          + ("" if data == CORPUS else " (PyTorch on random bytes)"), flush=True)
    header = ("precision", "mixtrain tok/s", "PyTorch tok/s", "ratio", "mixtrain GFLOP/s",
              "GEMM peak GFLOP/s", "% of peak")
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    notes = []
    with tempfile.TemporaryDirectory(prefix="mixtrain-train-bench-") as scratch:
        for precision in ("fp32", "bf16"):
            ours, ours_summary, params = mixtrain(build, precision, args.steps, args.warmup,
                                                  scratch)
            peer = pytorch(precision, data, args.torch_steps, args.torch_warmup)
            if int(peer["params"]) != params:
                sys.exit(f"parameter counts differ: mixtrain {params}, PyTorch {peer['params']}")
            theirs = float(peer["tokens_per_second"])
            peak, peak_shape = gemm_peak(build, precision)
            model_gflops = 6 * params * ours * 1e-9
            print(f"| {precision} | {ours:.0f} | {theirs:.0f} | {ours / theirs:.2f}x | "
                  f"{model_gflops:.1f} | {peak:.1f} | {100 * model_gflops / peak:.0f}% |",
                  flush=True)
            notes.append(f"{precision}: mixtrain summary JSON tokens_per_second "
                         f"{ours_summary:.0f} (all {args.warmup + args.steps} steps); PyTorch "
                         f"{peer['steps']} timed steps, BLAS {peer['blas']}; GEMM peak: "
                         f"gemm_bench '{peak_shape}'; {params} parameters")
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
