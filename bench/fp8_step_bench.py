"""Why: compute fp8 is about numerics here, not speed: a CPU has no fp8
units, so mixtrain's CPU backend quantizes each GEMM's operands exactly
and multiplies their values in bf16, which costs more than bf16 compute
alone. This measures by how much, on the example model (4 layers, dim
128, seq_len 64, micro_batch 16; the precision_agreement setup), timing
`mixtrain train` steps of bf16 and of fp8 with each scaling recipe side by
side.

Usage: /usr/bin/python3 bench/fp8_step_bench.py [BUILD_DIR]
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mixtrain_runs  # noqa: E402

MODEL = ["model.layers=4", "model.heads=4", "model.dim=128", "model.seq_len=64",
         "train.micro_batch=16", "zero.stage=0"]
RUNS = [("bf16", ["precision.compute=bf16"])] + [
    (f"fp8 {recipe}", ["precision.compute=fp8", f"precision.fp8={{scaling: {recipe}}}"])
    for recipe in ("delayed", "current", "mxfp8")]


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    with tempfile.TemporaryDirectory() as scratch:
        rates = {}
        for name, overrides in RUNS:
            rate, _ = mixtrain_runs.train(build, scratch, name.replace(" ", "-"), steps=40,
                                          warmup=5, overrides=MODEL + overrides)
            rates[name] = rate
    print(f"{'precision':14} {'tokens/s':>10} {'step time vs bf16':>18}")
    for name, rate in rates.items():
        print(f"{name:14} {rate:10.0f} {rates['bf16'] / rate:17.2f}x")


if __name__ == "__main__":
    main()
