#!/usr/bin/python3
"""Why: mixtrain's training throughput means little without a peer. This
trains the same GPT-2 (learned token and position embeddings, pre-LN blocks,
causal attention, 4x MLP with tanh GELU, final LN, tied head, GPT-2 init)
the way a PyTorch user would on this CPU: AdamW (betas 0.9/0.95, weight
decay 0.1 on 2-D weights only, lr 6e-4 held constant: a schedule costs
nothing), clip_grad_norm_ 1.0, fp32 or bf16 autocast, every core. (PyTorch
1.13 runs bf16 GEMMs on oneDNN only with AVX-512; without it they fall back
to ATen's generic loops.) After WARMUP untimed steps it times at
least STEPS steps, and more until MIN_SECONDS have passed, and prints one
line for bench/train_vs_pytorch.py, naming the BLAS library that ran the
fp32 GEMMs (Debian's python3-torch uses whatever libblas.so.3 is installed:
the reference netlib BLAS unless e.g. libopenblas0 is):

  torch_gpt_train precision=fp32 params=10844160 steps=2 tokens_per_second=39.1 blas=PATH

On a GPU (--device cuda, bench/gpu_train_bench.py) it is what a PyTorch
user runs there: flash attention (scaled_dot_product_attention), fused
AdamW, bf16 autocast, and with --compile the model under torch.compile;
the line then says device=NAME instead of blas=. --checkpoint-blocks
wraps each block in torch.utils.checkpoint (non-reentrant), the peer of
mixtrain's train.activation_checkpointing: blocks.

Usage: torch_gpt_train.py [--precision fp32|bf16] [--data FILE] [--steps N]
       [--warmup N] [--min-seconds S] [--layers 6] [--heads 6] [--dim 384]
       [--seq-len 256] [--micro-batch 8] [--vocab 256] [--seed 1337]
       [--device cpu|cuda] [--compile] [--checkpoint-blocks]
Without --data it trains on random tokens (throughput does not depend on them).
"""
import argparse
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

INIT_STD = 0.02


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, dim, heads, seq_len):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(dim)
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.attn_proj = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim)
        self.c_fc = nn.Linear(dim, 4 * dim)
        self.mlp_proj = nn.Linear(4 * dim, dim)
        self.register_buffer("causal", torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool)))

    def forward(self, x):  # x (B,T,C)
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        if x.is_cuda:  # flash attention
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch 1.13 (Debian's) has no scaled_dot_product_attention
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.heads)
            y = scores.masked_fill(~self.causal[:T, :T], float("-inf")).softmax(dim=-1) @ v
        x = x + self.attn_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers, heads, dim, seq_len, vocab, checkpoint_blocks=False):
        super().__init__()
        self.vocab = vocab
        self.checkpoint_blocks = checkpoint_blocks
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq_len, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, seq_len) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        # GPT-2 init: N(0, 0.02) weights, residual projections scaled by
        # 1/sqrt(2 layers), zero biases, LayerNorm (1, 0).
        for name, p in self.named_parameters():
            if p.dim() == 2:
                residual = name.endswith(("attn_proj.weight", "mlp_proj.weight"))
                nn.init.normal_(p, 0.0, INIT_STD / math.sqrt(2 * layers) if residual else INIT_STD)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, tokens, targets):  # tokens, targets (B,T)
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            if self.checkpoint_blocks:
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied head
        return F.cross_entropy(logits.view(-1, self.vocab), targets.reshape(-1))


def load_tokens(path, seed, vocab):
    """The training split: bytes of `path` before mixtrain's 10% validation tail."""
    if path is None:
        return torch.randint(0, vocab, (1 << 20,), generator=torch.Generator().manual_seed(seed))
    with open(path, "rb") as f:
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).long()
    return data[: int(len(data) * 0.9)]


def blas_libraries():
    """The BLAS shared libraries this process mapped, or "linked-in" (e.g. static MKL)."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "blas" in line.rsplit("/", 1)[-1]}
    return ",".join(sorted(paths)) or "linked-in"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--data")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--min-seconds", type=float, default=20.0)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--heads", type=int, default=6)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--checkpoint-blocks", action="store_true")
    args = parser.parse_args()

    cuda = args.device == "cuda"
    torch.set_num_threads(os.cpu_count())
    torch.manual_seed(args.seed)
    model = GPT(args.layers, args.heads, args.dim, args.seq_len, args.vocab,
                args.checkpoint_blocks).to(args.device)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() != 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=6e-4, betas=(0.9, 0.95), **({"fused": True} if cuda else {}))
    run_model = torch.compile(model) if args.compile else model
    data = load_tokens(args.data, args.seed, args.vocab)
    B, T = args.micro_batch, args.seq_len

    def step():
        starts = torch.randint(0, len(data) - T, (B,))
        window = torch.stack([data[s:s + T + 1] for s in starts])
        if cuda:
            window = window.pin_memory().to(args.device, non_blocking=True)
        with torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = run_model(window[:, :-1], window[:, 1:])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    def now():
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    for _ in range(args.warmup):
        step()
    start = now()
    steps = 0
    while steps < args.steps or now() - start < args.min_seconds:
        step()
        steps += 1
    seconds = now() - start
    params = sum(p.numel() for p in model.parameters())
    where = (f"device={torch.cuda.get_device_name().replace(' ', '_')}" if cuda
             else f"blas={blas_libraries()}")
    print(f"torch_gpt_train precision={args.precision} params={params} steps={steps} "
          f"tokens_per_second={steps * B * T / seconds:.1f} {where}")


if __name__ == "__main__":
    main()
