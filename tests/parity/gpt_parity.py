#!/usr/bin/python3
"""Why: the GPT model's forward and backward must be GPT-2, not merely
self-consistent. This rebuilds the model in PyTorch (Hugging Face
GPT2LMHeadModel's architecture, by HF names) from the model.safetensors that
gpt_parity_dump exported, runs it on the same batch, and compares:
  * the fp32 loss, within 1e-5 relative;
  * every parameter gradient, per HF name against grads.safetensors (our
    gradient through the same export), within 1e-4 relative, max-norm:
    max|ours - torch| / max|torch|;
  * our loss computing in bf16 against torch.autocast("cpu", bfloat16) on
    the same weights, within 1e-2 relative.

Usage: gpt_parity.py PATH/TO/gpt_parity_dump
Exit codes: 0 pass, 1 mismatch or error, 77 skipped (no torch).
"""
import json
import os
import subprocess
import sys
import tempfile

from gpt2_torch import config_of, gpt2_loss, read_safetensors  # exits 77 without torch
import torch

LOSS_RTOL = 1e-5
GRAD_RTOL = 1e-4
BF16_LOSS_RTOL = 1e-2


def relative_loss_error(label, ours, theirs, rtol, failures):
    """Prints and checks |ours - theirs| / |theirs|."""
    error = abs(ours - theirs) / abs(theirs)
    print(f"{label} loss: ours {ours:.9g} torch {theirs:.9g} relative error {error:.3e}")
    if error > rtol:
        failures.append(f"{label} loss relative error {error:.3e} > {rtol}")


def compare(directory):
    """Returns the list of failure messages (empty when everything matches)."""
    metadata, weights = read_safetensors(os.path.join(directory, "model.safetensors"))
    _, our_grads = read_safetensors(os.path.join(directory, "grads.safetensors"))
    with open(os.path.join(directory, "parity.json")) as f:
        ours = json.load(f)
    config = config_of(metadata)
    tokens = torch.tensor(ours["tokens"], dtype=torch.int64).view(ours["batch"])
    targets = torch.tensor(ours["targets"], dtype=torch.int64).view(ours["batch"])
    params = {name: torch.from_numpy(array.copy()).requires_grad_()
              for name, array in weights.items()}

    failures = []
    loss = gpt2_loss(params, config, tokens, targets)
    loss.backward()
    relative_loss_error("fp32", ours["loss_fp32"], loss.item(), LOSS_RTOL, failures)
    if set(our_grads) != set(params):
        failures.append(f"grads.safetensors names {sorted(our_grads)} differ from "
                        f"model.safetensors names {sorted(params)}")
    worst = (0.0, "")
    for name in sorted(set(our_grads) & set(params)):
        want = params[name].grad.double()
        got = torch.from_numpy(our_grads[name]).double()
        scale = want.abs().max().item()
        error = (got - want).abs().max().item() / max(scale, 1e-30)
        worst = max(worst, (error, name))
        if scale == 0.0 or error > GRAD_RTOL:
            failures.append(f"{name}: gradient max-norm relative error {error:.3e} "
                            f"(max |grad| {scale:.3e}) > {GRAD_RTOL}")
    print(f"gradients: {len(our_grads)} tensors, worst max-norm relative error "
          f"{worst[0]:.3e} ({worst[1]})")

    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        bf16_loss = gpt2_loss(params, config, tokens, targets).item()
    relative_loss_error("bf16", ours["loss_bf16"], bf16_loss, BF16_LOSS_RTOL, failures)
    return failures


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 1
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory(prefix="mixtrain-gpt-parity-") as directory:
        subprocess.run([sys.argv[1], directory], check=True)
        failures = compare(directory)
    for failure in failures:
        print("FAIL:", failure)
    print("PASS" if not failures else f"{len(failures)} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
