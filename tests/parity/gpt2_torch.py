"""Why: the torch-side tests (gpt_parity.py, tests/e2e/hf_export_check.py)
need the same two things: a safetensors reader written from the spec (the
`safetensors` package is not assumed) and a GPT-2 forward in torch that
works on Hugging Face GPT2LMHeadModel tensors by their HF names, the names
our export writes. This is their one copy.

Importing this module exits with SKIP (77) when torch or numpy is missing:
every script that uses it is a ctest with SKIP_RETURN_CODE 77.
"""
import json
import math
import struct
import sys
from typing import NamedTuple

SKIP = 77
try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as error:
    print(f"SKIP: {sys.executable} cannot import torch/numpy ({error})")
    sys.exit(SKIP)

# Metadata key of our export: "<layers>,<heads>,<dim>,<seq_len>,<vocab>".
CONFIG_KEY = "mixtrain_config"
_FLOAT_DTYPES = {"F32": np.float32, "F16": np.float16}


class GptConfig(NamedTuple):
    layers: int
    heads: int
    dim: int
    seq_len: int
    vocab: int


def config_of(metadata):
    """The GptConfig of an exported file's metadata."""
    return GptConfig(*(int(v) for v in metadata[CONFIG_KEY].split(",")))


def read_safetensors(path):
    """(metadata, {name: fp32 numpy array}) of a safetensors file (F32/F16/BF16)."""
    with open(path, "rb") as f:
        content = f.read()
    (header_len,) = struct.unpack("<Q", content[:8])
    header = json.loads(content[8:8 + header_len])
    data = content[8 + header_len:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        raw = data[begin:end]
        if entry["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=_FLOAT_DTYPES[entry["dtype"]]).astype(np.float32)
        tensors[name] = array.reshape(entry["shape"])
    return metadata, tensors


def gpt2_loss(p, config, tokens, targets):
    """Mean cross-entropy of GPT-2 (HF GPT2LMHeadModel, head tied to wte) on
    tokens and targets (B, T) int64, with parameters p {HF name: tensor}
    (Conv1D weights (in, out))."""
    batch, seq = tokens.shape
    dim, heads = config.dim, config.heads
    head_size = dim // heads

    def layernorm(x, prefix):
        return F.layer_norm(x, (dim,), p[prefix + ".weight"], p[prefix + ".bias"], eps=1e-5)

    def conv1d(x, prefix):  # HF Conv1D: x @ W + b with W (in, out)
        return x @ p[prefix + ".weight"] + p[prefix + ".bias"]

    causal = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
    x = p["transformer.wte.weight"][tokens] + p["transformer.wpe.weight"][torch.arange(seq)]
    for layer in range(config.layers):
        h = f"transformer.h.{layer}"
        q, k, v = conv1d(layernorm(x, h + ".ln_1"), h + ".attn.c_attn").split(dim, dim=2)
        q, k, v = (t.reshape(batch, seq, heads, head_size).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(head_size)
        att = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(batch, seq, dim)
        x = x + conv1d(y, h + ".attn.c_proj")
        m = F.gelu(conv1d(layernorm(x, h + ".ln_2"), h + ".mlp.c_fc"), approximate="tanh")
        x = x + conv1d(m, h + ".mlp.c_proj")
    logits = layernorm(x, "transformer.ln_f") @ p["transformer.wte.weight"].t()
    return F.cross_entropy(logits.reshape(-1, config.vocab), targets.reshape(-1))
