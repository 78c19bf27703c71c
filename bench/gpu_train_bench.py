#!/usr/bin/env python3
"""Why: issue 14's device run in one call. On a GPU machine, with the
engine-only build of scripts/gpu-check.sh, this checks the CUDA backend's
first training steps against the CPU backend's (the example model in fp32,
bf16 and fp16, and stage 3 with both offloads), then measures GPT-2 124M
training (12 layers, dim 768, 12 heads, seq_len 1024, vocab 50304, bf16,
micro_batch 16) with mixtrain (bench/engine_train_bench) and with PyTorch's
own GPT-2 under torch.compile (bench/torch_gpt_train.py --device cuda
--compile) on the same device, and prints tokens/s, their ratio and MFU.

MFU: model FLOPs per token 6 * params + 12 * layers * dim * seq_len
(PaLM, appendix B) times tokens/s over the device's dense bf16 peak:
989.4 TFLOP/s for an H100/H200 SXM, 312 for an A100 (--peak-tflops sets it).

  bench/gpu_train_bench.py BUILD_DIR [--steps 30] [--warmup 5] [--peak-tflops X]
      [--skip-compare] [--skip-torch]
Exit status 1 when a comparison differs or a run fails.
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = ["--layers", "6", "--heads", "6", "--dim", "384", "--seq-len", "256",
           "--micro-batch", "8"]
GPT2 = ["--layers", "12", "--heads", "12", "--dim", "768", "--seq-len", "1024",
        "--vocab", "50304", "--micro-batch", "16"]
PEAKS = {"H200": 989.4, "H100": 989.4, "A100": 312.0}  # dense bf16, SXM


def run(command):
    """stdout of `command`, its stderr passed through; None when it failed."""
    print("$ " + " ".join(command), flush=True)
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    sys.stdout.write(done.stdout)
    return done.stdout if done.returncode == 0 else None


def fields(line_start, out):
    """The key=value fields of the first line of `out` starting with line_start."""
    for line in (out or "").splitlines():
        if line.startswith(line_start):
            return dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
    return {}


def device_peak():
    """The dense bf16 peak (TFLOP/s) of GPU 0 by its name, or 0."""
    try:
        name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              stdout=subprocess.PIPE, text=True).stdout
    except OSError:
        return 0.0
    return next((peak for key, peak in PEAKS.items() if key in name), 0.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--peak-tflops", type=float, default=0.0)
    parser.add_argument("--skip-compare", action="store_true")
    parser.add_argument("--skip-torch", action="store_true")
    args = parser.parse_args()
    bench = os.path.join(args.build, "bench", "engine_train_bench")
    failed = False

    if not args.skip_compare:
        print("== the CUDA backend's first steps against the CPU backend's", flush=True)
        cases = [["--precision", p] for p in ("fp32", "bf16", "fp16")]
        cases.append(["--precision", "bf16", "--stage", "3", "--offload"])
        for case in cases:
            out = run([bench, "--backend", "cuda", "--compare-backend", "cpu", "--steps", "3",
                       "--warmup", "1", "--tolerance", "0.02"] + EXAMPLE + case)
            failed |= out is None

    peak = args.peak_tflops or device_peak()
    print(f"== GPT-2 124M shape, bf16, micro_batch 16: mixtrain vs PyTorch (peak {peak} TFLOP/s)",
          flush=True)
    ours = fields("engine_train_bench", run(
        [bench, "--backend", "cuda", "--precision", "bf16", "--steps", str(args.steps),
         "--warmup", str(args.warmup)] + GPT2 + (["--peak-tflops", str(peak)] if peak else [])))
    failed |= not ours
    theirs = {}
    if not args.skip_torch:
        theirs = fields("torch_gpt_train", run(
            [sys.executable, os.path.join(ROOT, "bench", "torch_gpt_train.py"), "--device",
             "cuda", "--compile", "--precision", "bf16", "--steps", str(args.steps),
             "--warmup", str(args.warmup), "--min-seconds", "10"] + GPT2))
        failed |= not theirs
    if ours:
        tps = float(ours["tokens_per_second"])
        params = int(ours["params"])
        flops = (6 * params + 12 * 12 * 768 * 1024) * tps / 1e12
        line = f"mixtrain: {tps:,.0f} tokens/s, {flops:.1f} TFLOP/s"
        if peak:
            line += f", MFU {flops / peak:.1%}"
        if theirs:
            torch_tps = float(theirs["tokens_per_second"])
            torch_flops = (6 * int(theirs["params"]) + 12 * 12 * 768 * 1024) * torch_tps / 1e12
            line += (f"; PyTorch (torch.compile): {torch_tps:,.0f} tokens/s, "
                     f"{torch_flops:.1f} TFLOP/s")
            if peak:
                line += f", MFU {torch_flops / peak:.1%}"
            line += f"; ratio {tps / torch_tps:.2f}"
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
