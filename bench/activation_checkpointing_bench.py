#!/usr/bin/python3
"""Why: activation checkpointing trades compute for memory, and both sides
of the trade are measured here, side by side with PyTorch's own block
checkpointing (torch.utils.checkpoint, non-reentrant) on the same model:
for the example model (6 layers, dim 384, seq_len 256, micro_batch 8) and
a GPT-2-small shape (12 layers, 12 heads, dim 768, seq_len 1024,
micro_batch 1; byte vocabulary) in bf16, each of none / selective / blocks
runs `mixtrain train`, and the table gives the activations' peak from
the summary (memory_bytes.device.activations: the forward's saved
tensors, the backward's scratch gradients and the logits), the device
pool's peak, tokens/s and the step time against none. PyTorch's row is
its step time with every block checkpointed against none (its CPU
allocator does not count bytes, so no memory column).

Usage: /usr/bin/python3 bench/activation_checkpointing_bench.py [BUILD_DIR]
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mixtrain_runs  # noqa: E402

MODELS = [
    ("example", {"layers": 6, "heads": 6, "dim": 384, "seq_len": 256, "micro_batch": 8},
     2, 10),
    ("gpt2-small shape", {"layers": 12, "heads": 12, "dim": 768, "seq_len": 1024,
                          "micro_batch": 1}, 1, 4),
]
MODES = ("none", "selective", "blocks")


def torch_rate(shape, checkpoint_blocks):
    """tokens/s of bench/torch_gpt_train.py on `shape` in bf16."""
    command = [sys.executable, os.path.join(mixtrain_runs.ROOT, "bench", "torch_gpt_train.py"),
               "--precision", "bf16", "--steps", "3", "--warmup", "1", "--min-seconds", "15",
               "--layers", str(shape["layers"]), "--heads", str(shape["heads"]),
               "--dim", str(shape["dim"]), "--seq-len", str(shape["seq_len"]),
               "--micro-batch", str(shape["micro_batch"])]
    if checkpoint_blocks:
        command.append("--checkpoint-blocks")
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return float(re.search(r"tokens_per_second=([\d.]+)", out).group(1))


def mib(value):
    return f"{value / 2**20:.1f}"


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    with tempfile.TemporaryDirectory() as scratch:
        for name, shape, warmup, steps in MODELS:
            overrides = [f"model.{key}={shape[key]}" for key in ("layers", "heads", "dim", "seq_len")]
            overrides += [f"train.micro_batch={shape['micro_batch']}", "precision.compute=bf16",
                          "zero.stage=0"]
            print(f"== {name}: {shape['layers']} layers, dim {shape['dim']}, "
                  f"seq_len {shape['seq_len']}, micro_batch {shape['micro_batch']}, bf16")
            print(f"{'mode':10} {'activations MiB':>16} {'vs none':>8} {'device peak MiB':>16} "
                  f"{'tok/s':>8} {'step time vs none':>18}")
            results = {}
            for mode in MODES:
                rate, summary = mixtrain_runs.train(
                    build, scratch, f"{name.split()[0]}-{mode}", steps=steps, warmup=warmup,
                    overrides=overrides + [f"train.activation_checkpointing={mode}"])
                device = summary["ranks"][0]["memory_bytes"]["device"]
                results[mode] = (rate, device["activations"], device["peak"])
            none_rate, none_activations, _ = results["none"]
            for mode, (rate, activations, peak) in results.items():
                print(f"{mode:10} {mib(activations):>16} {none_activations / activations:7.2f}x "
                      f"{mib(peak):>16} {rate:8.0f} {none_rate / rate:17.2f}x")
            plain, checkpointed = torch_rate(shape, False), torch_rate(shape, True)
            print(f"PyTorch 1.13 blocks (torch.utils.checkpoint): {plain:.0f} -> "
                  f"{checkpointed:.0f} tok/s, step time {plain / checkpointed:.2f}x none's\n")


if __name__ == "__main__":
    main()
