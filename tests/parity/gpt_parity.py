#!/usr/bin/python3
"""Why: the GPT model's forward and backward must be GPT-2, not merely
self-consistent. This rebuilds the model in PyTorch (Hugging Face
GPT2LMHeadModel's architecture and parameter names, Conv1D weights stored
(in, out)) from the weights gpt_parity_dump wrote, runs forward and backward
in fp32, and compares the loss (1e-5 relative) and every parameter gradient
(1e-4 relative, max-norm: max|ours - torch| / max|torch|).

Usage: gpt_parity.py PATH/TO/gpt_parity_dump
Exit codes: 0 pass, 1 mismatch or error, 77 skipped (no torch).
"""
import math
import os
import subprocess
import sys
import tempfile

SKIP = 77
LOSS_RTOL = 1e-5
GRAD_RTOL = 1e-4

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as error:
    print(f"SKIP: {sys.executable} cannot import torch/numpy ({error})")
    sys.exit(SKIP)


def read_dump(directory):
    """Parses header.txt and the .bin files (format: gpt_parity_dump.cc)."""
    with open(os.path.join(directory, "header.txt")) as f:
        lines = [line.split() for line in f.read().splitlines()]
    if lines[0] != ["mixtrain-gpt-parity", "1"]:
        raise ValueError(f"unknown header {lines[0]}")
    dump = {"params": []}
    for fields in lines[1:]:
        if fields[0] == "config":
            dump["layers"], dump["heads"], dump["dim"], dump["seq_len"], dump["vocab"] = map(
                int, fields[1:])
        elif fields[0] == "batch":
            dump["batch"], dump["seq"] = map(int, fields[1:])
        elif fields[0] == "loss":
            dump["loss"] = float(fields[1])
        elif fields[0] == "param":
            name, offset, numel, transposed = fields[1], int(fields[2]), int(fields[3]), fields[4]
            dump["params"].append((name, offset, numel, transposed == "1",
                                   tuple(int(d) for d in fields[5:])))
    load = lambda name, dtype: np.fromfile(os.path.join(directory, name), dtype=dtype)
    dump["weights"] = load("weights.bin", "<f4")
    dump["grads"] = load("grads.bin", "<f4")
    shape = (dump["batch"], dump["seq"])
    dump["tokens"] = load("tokens.bin", "<i4").reshape(shape)
    dump["targets"] = load("targets.bin", "<i4").reshape(shape)
    return dump


def hf_tensor(flat, offset, numel, transposed, shape):
    """A parameter in HF layout: our (out, in) linear weights transposed to (in, out)."""
    t = torch.from_numpy(flat[offset:offset + numel].copy()).reshape(shape)
    return t.t().contiguous() if transposed else t


def gpt2_loss(p, dump, tokens, targets):
    """GPT-2 forward (HF GPT2LMHeadModel, tied head) to the mean cross-entropy."""
    batch, seq, dim, heads = dump["batch"], dump["seq"], dump["dim"], dump["heads"]
    head_size = dim // heads

    def layernorm(x, prefix):
        return F.layer_norm(x, (dim,), p[prefix + ".weight"], p[prefix + ".bias"], eps=1e-5)

    def conv1d(x, prefix):  # HF Conv1D: x @ W + b with W (in, out)
        return x @ p[prefix + ".weight"] + p[prefix + ".bias"]

    causal = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
    x = p["transformer.wte.weight"][tokens] + p["transformer.wpe.weight"][torch.arange(seq)]
    for layer in range(dump["layers"]):
        h = f"transformer.h.{layer}"
        q, k, v = conv1d(layernorm(x, h + ".ln_1"), h + ".attn.c_attn").split(dim, dim=2)
        q, k, v = (t.view(batch, seq, heads, head_size).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(head_size)
        att = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(batch, seq, dim)
        x = x + conv1d(y, h + ".attn.c_proj")
        m = F.gelu(conv1d(layernorm(x, h + ".ln_2"), h + ".mlp.c_fc"), approximate="tanh")
        x = x + conv1d(m, h + ".mlp.c_proj")
    logits = layernorm(x, "transformer.ln_f") @ p["transformer.wte.weight"].t()
    return F.cross_entropy(logits.view(-1, dump["vocab"]), targets.view(-1))


def compare(dump):
    """Returns the list of failure messages (empty when everything matches)."""
    params = {name: hf_tensor(dump["weights"], offset, numel, transposed, shape).requires_grad_()
              for name, offset, numel, transposed, shape in dump["params"]}
    tokens = torch.from_numpy(dump["tokens"].astype(np.int64))
    targets = torch.from_numpy(dump["targets"].astype(np.int64))
    loss = gpt2_loss(params, dump, tokens, targets)
    loss.backward()

    failures = []
    loss_error = abs(dump["loss"] - loss.item()) / abs(loss.item())
    print(f"loss: ours {dump['loss']:.9g} torch {loss.item():.9g} relative error {loss_error:.3e}")
    if loss_error > LOSS_RTOL:
        failures.append(f"loss relative error {loss_error:.3e} > {LOSS_RTOL}")
    worst = (0.0, "")
    for name, offset, numel, transposed, shape in dump["params"]:
        want = params[name].grad
        want = (want.t() if transposed else want).reshape(-1).double()
        got = torch.from_numpy(dump["grads"][offset:offset + numel].astype(np.float64))
        scale = want.abs().max().item()
        error = (got - want).abs().max().item() / max(scale, 1e-30)
        worst = max(worst, (error, name))
        if scale == 0.0 or error > GRAD_RTOL:
            failures.append(f"{name}: gradient max-norm relative error {error:.3e} "
                            f"(max |grad| {scale:.3e}) > {GRAD_RTOL}")
    print(f"gradients: {len(dump['params'])} tensors, worst max-norm relative error "
          f"{worst[0]:.3e} ({worst[1]})")
    return failures


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 1
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory(prefix="mixtrain-gpt-parity-") as directory:
        subprocess.run([sys.argv[1], directory], check=True)
        failures = compare(read_dump(directory))
    for failure in failures:
        print("FAIL:", failure)
    print("PASS" if not failures else f"{len(failures)} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
