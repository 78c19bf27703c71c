"""Why: mixtrain's AdamW must match torch.optim.AdamW step for step, or
parity runs against PyTorch drift apart. This runs K steps of
torch.optim.AdamW (the installed torch, not a transcription of its formula)
and of mixtrain's adamw_step (through adamw_parity_tool) on the same
weights, gradients and hyperparameters, and requires master weights, m and
v to agree within 1e-6 relative, and each parameter's compute-dtype copy to
be exactly the tool's master weights rounded by torch.

"Relative" is measured as in the backend tests (backend_test_util.h):
|got - want| <= 1e-6 * (|want| + rms(want)) per element. The rms term is
needed because the two implementations round differently (torch's
exp_avg.mul_(beta1).add_(grad, alpha=1-beta1) is two kernels, one of them
fused multiply-add; mixtrain's is one fp32 expression), so where m nearly
cancels to 0 a difference of one ulp of its terms is a large fraction of
the tiny result: element-wise relative errors there reach 1e-3 while the
differences stay at fp32 rounding of the tensor's scale.

Usage: /usr/bin/python3 adamw_torch_parity.py PATH/TO/adamw_parity_tool
Exit 0: parity holds; 1: it does not; 77: torch cannot be imported (ctest
reports the test as skipped).
"""
import os
import struct
import subprocess
import sys
import tempfile

SKIP = 77
STEPS = 6
REL_TOL = 1e-6

try:
    import torch
except Exception as error:  # any failure to import means no reference
    print(f"SKIP: torch cannot be imported by {sys.executable} ({error}); "
          "install python3-torch to run the AdamW parity test")
    sys.exit(SKIP)

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def f32(x):
    """x rounded to the nearest float32, as a Python float."""
    return struct.unpack("f", struct.pack("f", x))[0]


# (numel, decay, grad dtype, param_out dtype or "none"); 5000 crosses the
# CPU backend's 4096-element chunks.
PARAMS = [(37, True, "fp32", "none"), (5000, False, "bf16", "bf16"), (300, True, "fp16", "fp16")]

# (name, lr, beta1, beta2, eps, weight_decay, grad_scale): one plain case and
# one as a fp16 run makes it (grads carry a loss scale of 1024 and are
# clipped by 0.8, folded into grad_scale), with decay.
CASES = [
    ("unscaled, no decay", 1e-3, 0.9, 0.999, 1e-8, 0.0, 1.0),
    ("scaled and clipped, decay 0.1", 3e-3, 0.9, 0.95, 1e-8, 0.1, 0.8 / 1024),
]


def make_inputs(seed, grad_scale):
    """Per parameter: float32 master weights and STEPS gradients exact in their dtype."""
    gen = torch.Generator().manual_seed(seed)
    inputs = []
    for numel, _, grad_dtype, _ in PARAMS:
        master = torch.randn(numel, generator=gen, dtype=torch.float32)
        grads = []
        for _ in range(STEPS):
            g = torch.randn(numel, generator=gen, dtype=torch.float32) / grad_scale
            g[::13] = 0.0  # some gradients exactly zero at every step
            grads.append(g.to(DTYPES[grad_dtype]).to(torch.float32))
        inputs.append((master, grads))
    return inputs


def hex_values(t):
    return " ".join(float(x).hex() for x in t.tolist())


def write_input(path, hyper, inputs):
    lr, beta1, beta2, eps, wd, grad_scale = hyper
    lines = ["adamw-parity-v1", f"steps {STEPS}",
             "hyper " + " ".join(x.hex() for x in (lr, beta1, beta2, eps, wd, grad_scale)),
             f"params {len(PARAMS)}"]
    for (numel, decay, grad_dtype, out_dtype), (master, grads) in zip(PARAMS, inputs):
        lines.append(f"param {numel} {int(decay)} {grad_dtype} {out_dtype}")
        lines.append("master " + hex_values(master))
        lines.append("grads " + " ".join(hex_values(g) for g in grads))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def run_tool(tool, path):
    """{(param index, label): float32 tensor} from the tool's output."""
    result = subprocess.run([tool, path], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{tool} exited {result.returncode}: {result.stderr}")
    values = {}
    index = -1
    for line in result.stdout.splitlines():
        label, *numbers = line.split()
        if label == "master":
            index += 1
        values[(index, label)] = torch.tensor([float.fromhex(x) for x in numbers],
                                              dtype=torch.float32)
    return values


def torch_reference(hyper, inputs):
    """[(master, m, v)] after STEPS steps of torch.optim.AdamW."""
    lr, beta1, beta2, eps, wd, grad_scale = hyper
    params = [torch.nn.Parameter(master.clone()) for master, _ in inputs]
    groups = [{"params": [p for p, spec in zip(params, PARAMS) if spec[1]], "weight_decay": wd},
              {"params": [p for p, spec in zip(params, PARAMS) if not spec[1]],
               "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=lr, betas=(beta1, beta2), eps=eps, foreach=False)
    scale = torch.tensor(grad_scale, dtype=torch.float32)
    for step in range(STEPS):
        for p, (_, grads) in zip(params, inputs):
            p.grad = grads[step] * scale
        optimizer.step()
    return [(p.detach(), optimizer.state[p]["exp_avg"], optimizer.state[p]["exp_avg_sq"])
            for p in params]


def max_relative_error(got, want):
    """max over elements of |got - want| / (|want| + rms(want)) (0 when both are all 0)."""
    got, want = got.double(), want.double()
    rms = float(want.pow(2).mean().sqrt())
    if rms == 0.0:
        return 0.0 if bool((got == 0).all()) else float("inf")
    return float(((got - want).abs() / (want.abs() + rms)).max())


def check_case(tool, workdir, case_index, case):
    name, *raw = case
    hyper = tuple(f32(x) for x in raw)
    inputs = make_inputs(1000 + case_index, hyper[-1])
    path = os.path.join(workdir, f"case{case_index}.txt")
    write_input(path, hyper, inputs)
    got = run_tool(tool, path)
    ok = True
    for i, want in enumerate(torch_reference(hyper, inputs)):
        for label, want_values in zip(("master", "m", "v"), want):
            error = max_relative_error(got[(i, label)], want_values)
            passed = error <= REL_TOL
            ok &= passed
            print(f"{name}: param {i} {label}: max relative error {error:.3g}"
                  f"{'' if passed else '  FAIL'}")
        out_dtype = PARAMS[i][3]
        if out_dtype != "none":
            rounded = got[(i, "master")].to(DTYPES[out_dtype]).to(torch.float32)
            exact = torch.equal(got[(i, "out")], rounded)
            ok &= exact
            print(f"{name}: param {i} {out_dtype} copy equals torch's rounding of master: {exact}")
    return ok


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory() as workdir:
        results = [check_case(sys.argv[1], workdir, i, case) for i, case in enumerate(CASES)]
    print("PASS" if all(results) else "FAIL: mixtrain's AdamW differs from torch.optim.AdamW")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
