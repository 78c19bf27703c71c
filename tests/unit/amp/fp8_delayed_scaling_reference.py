"""Why: mixtrain's delayed fp8 scaling must follow Transformer Engine's
DelayedScaling rules step for step, or its fp8 runs are not comparable with
TE's. This is a transcription of those rules (TE's
amax_and_scale_update: amax from the whole history or its most recent
entry, scale = (FP8_MAX * 2^-margin) / amax in fp32 when amax is finite and
positive, FLT_MAX when that overflows, else the scale kept; then the
history rolls, the newest amax going last and position 0 cleared),
written independently of the C++ in numpy float32, run on recorded amax
sequences (random binades, zeros, infinities, tiny and huge values) for
every combination of history length, amax_compute, margin and format, and
compared bit for bit with fp8_recipe_tool.

Usage: /usr/bin/python3 fp8_delayed_scaling_reference.py PATH/TO/fp8_recipe_tool
Exit 0: identical; 1: a difference; 77: numpy cannot be imported.
"""
import subprocess
import sys

try:
    import numpy as np
except Exception as error:
    print(f"SKIP: numpy cannot be imported by {sys.executable} ({error})")
    sys.exit(77)

E4M3_MAX = np.float32(448.0)
E5M2_MAX = np.float32(57344.0)
FLT_MAX = np.finfo(np.float32).max
GEMMS = 3
STEPS = 40


def reference(amaxes, history_len, amax_compute, margin, fmt):
    """Scales after each step, as float32 arrays of GEMMS * 3."""
    slots = GEMMS * 3
    history = np.zeros((slots, history_len), dtype=np.float32)
    scale = np.ones(slots, dtype=np.float32)
    out = []
    for step in amaxes:
        for s in range(slots):
            history[s, 0] = step[s]
            kind = s % 3
            fp8_max = E5M2_MAX if (kind == 2 and fmt == "hybrid") else E4M3_MAX
            amax = np.max(history[s]) if amax_compute == "max" else history[s, 0]
            if np.isfinite(amax) and amax > 0:
                scaled_max = np.float32(fp8_max * np.float32(2.0) ** np.float32(-margin))
                with np.errstate(over="ignore"):
                    value = np.float32(scaled_max / amax)
                scale[s] = FLT_MAX if np.isinf(value) else value
            newest = history[s, 0]
            history[s, :-1] = history[s, 1:].copy()
            history[s, -1] = newest
            history[s, 0] = 0
        out.append(scale.copy())
    return out


def sequences(seed):
    rng = np.random.default_rng(seed)
    steps = []
    for t in range(STEPS):
        exponents = rng.integers(-20, 20, size=GEMMS * 3)
        values = (rng.random(GEMMS * 3) * np.exp2(exponents)).astype(np.float32)
        if t % 7 == 3:
            values[rng.integers(0, GEMMS * 3)] = 0.0          # nothing recorded
        if t == 11:
            values[4] = np.inf                                  # an overflowing tensor
        if t == 17:
            values[5] = np.float32(1e-45)                      # scale overflows: FLT_MAX
        if t == 23:
            values[6] = np.float32(3e38)                       # huge amax, tiny scale
        steps.append(values)
    return steps


def run_tool(tool, steps, history_len, amax_compute, margin, fmt):
    lines = [f"{GEMMS} {history_len} {amax_compute} {margin} {fmt}"]
    for step in steps:
        lines.append(" ".join(f"{int(x.view(np.uint32)):08x}" for x in step))
    result = subprocess.run([tool], input="\n".join(lines) + "\n", capture_output=True,
                            text=True, check=True)
    return [np.array([int(w, 16) for w in line.split()], dtype=np.uint32).view(np.float32)
            for line in result.stdout.splitlines()]


def main():
    tool = sys.argv[1]
    failures = 0
    cases = 0
    for history_len in (1, 4, 16, 1024):
        for amax_compute in ("max", "most_recent"):
            for margin in (0, 2):
                for fmt in ("hybrid", "e4m3"):
                    steps = sequences(history_len * 10 + margin)
                    want = reference(steps, history_len, amax_compute, margin, fmt)
                    got = run_tool(tool, steps, history_len, amax_compute, margin, fmt)
                    cases += 1
                    for t, (g, w) in enumerate(zip(got, want)):
                        if len(got) != len(want) or not np.array_equal(g.view(np.uint32),
                                                                        w.view(np.uint32)):
                            print(f"FAIL history {history_len} {amax_compute} margin {margin} "
                                  f"{fmt}: step {t + 1}: got {g}, want {w}")
                            failures += 1
                            break
    print(f"{cases} recipe configurations x {STEPS} steps: "
          f"{'identical' if failures == 0 else f'{failures} differ'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
