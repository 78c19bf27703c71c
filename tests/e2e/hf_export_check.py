#!/usr/bin/python3
"""Why: `mixtrain export` must write a file that Hugging Face GPT-2 code can
use. This trains a tiny job with the real binary (two ranks at ZeRO stage 3,
so the checkpoint is two shards), exports it, reads the file with a reader
written from the safetensors spec (the `safetensors` package is not
assumed), and checks that every GPT2LMHeadModel parameter is there under its
HF name and HF shape, equal to the checkpoint's master weights (assembled
here from the shards' "segments" metadata; Conv1D weights transposed to
(in, out)), with no lm_head.weight (tied), and that the torch GPT-2 of
tests/parity/gpt2_torch.py runs on it to a finite loss near the uniform
guess.

Usage: hf_export_check.py PATH/TO/mixtrain SOURCE_DIR
Exit codes: 0 pass, 1 mismatch or error, 77 skipped (no torch/numpy).
"""
import glob
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "parity"))
from gpt2_torch import CONFIG_KEY, GptConfig, gpt2_loss, read_safetensors  # exits 77 without torch
import numpy as np
import torch

LAYERS, HEADS, DIM, SEQ, VOCAB = 2, 2, 32, 32, 256


def hf_shapes():
    """Every GPT2LMHeadModel parameter's HF name and shape, in HF order."""
    c = DIM
    shapes = {"transformer.wte.weight": (VOCAB, c), "transformer.wpe.weight": (SEQ, c)}
    for layer in range(LAYERS):
        h = f"transformer.h.{layer}."
        shapes.update({
            h + "ln_1.weight": (c,), h + "ln_1.bias": (c,),
            h + "attn.c_attn.weight": (c, 3 * c), h + "attn.c_attn.bias": (3 * c,),
            h + "attn.c_proj.weight": (c, c), h + "attn.c_proj.bias": (c,),
            h + "ln_2.weight": (c,), h + "ln_2.bias": (c,),
            h + "mlp.c_fc.weight": (c, 4 * c), h + "mlp.c_fc.bias": (4 * c,),
            h + "mlp.c_proj.weight": (4 * c, c), h + "mlp.c_proj.bias": (c,),
        })
    shapes.update({"transformer.ln_f.weight": (c,), "transformer.ln_f.bias": (c,)})
    return shapes


def checkpoint_master(checkpoint, config):
    """The master weights of a checkpoint directory, assembled from its shards."""
    shards = sorted(glob.glob(os.path.join(checkpoint, "shard-*-of-*.safetensors")))
    pieces = []
    for shard in shards:
        metadata, tensors = read_safetensors(shard)
        if metadata.get(CONFIG_KEY) != ",".join(map(str, config)):
            raise RuntimeError(
                f"{shard}: {CONFIG_KEY} {metadata.get(CONFIG_KEY)!r}, want {config}")
        packed = 0
        for offset, numel in json.loads(metadata["segments"]):
            pieces.append((offset, tensors["master"][packed:packed + numel]))
            packed += numel
    pieces.sort(key=lambda piece: piece[0])
    covered = 0
    for offset, values in pieces:
        if offset != covered:
            raise RuntimeError(f"the shards {shards} do not tile the model at value {covered}")
        covered += values.size
    if len(shards) != 2:
        raise RuntimeError(f"expected the two ranks' shards, got {shards}")
    return np.concatenate([values for _, values in pieces])


def run(*args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(
            f"{args[:2]} exited {result.returncode}:\n{result.stdout}{result.stderr}")


def main():
    mixtrain, source_dir = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as work:
        sets = [f"model.layers={LAYERS}", f"model.heads={HEADS}", f"model.dim={DIM}",
                f"model.seq_len={SEQ}", "train.warmup_steps=2",
                "train.steps=4", "train.eval_batches=1", "resources.workers=2",
                "train.micro_batch=2", "zero.stage=3",
                f"checkpoint.dir={work}/ckpt"]
        args = [mixtrain, "train", os.path.join(source_dir, "examples", "demo.yaml")]
        for s in sets:
            args += ["--set", s]
        run(*args)
        exported = os.path.join(work, "model.safetensors")
        run(mixtrain, "export", f"{work}/ckpt", "--format", "safetensors", "-O", exported)
        metadata, tensors = read_safetensors(exported)
        config = GptConfig(LAYERS, HEADS, DIM, SEQ, VOCAB)
        master = checkpoint_master(sorted(glob.glob(f"{work}/ckpt/step_*"))[-1], config)

    failures = []
    if metadata.get("format") != "pt":
        failures.append(f"metadata format {metadata.get('format')!r}, want 'pt'")
    if metadata.get(CONFIG_KEY) != ",".join(map(str, config)):
        failures.append(f"metadata {CONFIG_KEY} {metadata.get(CONFIG_KEY)!r}, want {config}")
    shapes = hf_shapes()
    extra = sorted(set(tensors) - set(shapes))
    if extra:
        failures.append(f"unexpected tensors {extra} (lm_head.weight is tied and omitted)")
    offset = 0
    for name, shape in shapes.items():
        numel = math.prod(shape)
        ours = master[offset:offset + numel]
        offset += numel
        if name not in tensors:
            failures.append(f"{name} missing")
            continue
        if tuple(tensors[name].shape) != shape:
            failures.append(f"{name} has shape {tensors[name].shape}, HF has {shape}")
            continue
        conv1d = name.endswith(".weight") and (".attn." in name or ".mlp." in name)
        want = ours.reshape(shape[::-1]).T if conv1d else ours.reshape(shape)
        if not np.array_equal(tensors[name], want):
            failures.append(f"{name} differs from the checkpoint's master weights")
    if offset != master.size:
        failures.append(f"HF parameters hold {offset} values, the checkpoint {master.size}")

    if not failures:
        p = {name: torch.from_numpy(array.copy()) for name, array in tensors.items()}
        tokens = torch.arange(SEQ).remainder(VOCAB).view(1, SEQ)
        targets = torch.roll(tokens, -1, dims=1)
        loss = gpt2_loss(p, config, tokens, targets).item()
        if not math.isfinite(loss) or abs(loss - math.log(VOCAB)) > 3.0:
            failures.append(f"torch GPT-2 loss on the exported weights is {loss}")
        else:
            print(f"torch GPT-2 loss on the exported weights: {loss:.4f}")

    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print(f"hf export: {len(shapes)} tensors match HF names, shapes and the checkpoint")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
