"""ebm's CPU energies and scores (B=32768, D=16) against torch.compile(reference), and against the build of
another kernels root (e.g. the session's starting tree), in one process: each pair timed alternately, five
rounds, the median of each round's lower-quartile call, so load from other processes hits both sides alike.

    python cpu_vs_compile.py [--base /path/to/other/kernels]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import loader  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--base", help="a kernels root whose ebm build is timed beside this tree's")
args = parser.parse_args()
ebm = loader.load("ebm")
base = loader.load("ebm", root=args.base) if args.base else None
ref = ebm.reference


def quartile_us(fn, *a, reps=30):
    fn(*a)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn(*a)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 4] * 1e6


ops = ["harmonic", "double_well", "rosenbrock", "rastrigin", "ackley"]
print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; µs")
print(f"{'op':28s} {'dtype':9s} {'ours':>8s} {'compile':>8s} {'x compile':>9s}" + ("   base  x base" if base else ""))
for dtype in (torch.float32, torch.bfloat16):
    x = torch.randn(32768, 16, dtype=dtype, generator=torch.Generator().manual_seed(0))
    mean, precision = torch.randn(16, dtype=dtype), torch.eye(16, dtype=dtype) * 2
    cases = [(f"{m}_{kind}", (x,)) for m in ops for kind in ("energy", "score")]
    cases += [("gaussian_energy", (x, mean, precision)), ("gaussian_score", (x, mean, precision))]
    for name, inputs in cases:
        compiled = torch.compile(getattr(ref, name))
        sides = {"ours": getattr(ebm, name), "compile": compiled} | ({"base": getattr(base, name)} if base else {})
        rounds = {side: [] for side in sides}
        for _ in range(5):
            for side, fn in sides.items():
                rounds[side].append(quartile_us(fn, *inputs))
        t = {side: statistics.median(v) for side, v in rounds.items()}
        line = f"{name:28s} {str(dtype)[6:]:9s} {t['ours']:8.1f} {t['compile']:8.1f} {t['compile'] / t['ours']:9.2f}"
        if base:
            line += f" {t['base']:8.1f} {t['base'] / t['ours']:6.2f}"
        print(line, flush=True)
