"""matrix_inverse_root on the general route (n = 256 / 1024, one matrix; n = 256 batch 64), several kernels
roots in one process (each build its own op namespace), alternating rounds, do_bench medians (us).
    python ab_large_roots.py label=<kernels dir> ... [rounds]"""
import json, os, statistics, sys
import torch
from triton.testing import do_bench
sys.path.insert(0, os.getcwd())
import loader
args = sys.argv[1:]
roots = dict(arg.split("=", 1) for arg in args if "=" in arg)
rounds = int(args[-1]) if args and args[-1].isdigit() else 3
families = {label: loader.load("linalg", root) for label, root in roots.items()}
cases = []
for n, batch in ((256, ()), (1024, ()), (256, (64,))):
    a = torch.randn(*batch, n, n, device="cuda")
    cases.append((n, batch, a @ a.mT / n + torch.eye(n, device="cuda")))
times = {}
for _ in range(rounds):
    for n, batch, A in cases:
        for label, f in families.items():
            us = do_bench(lambda: f.matrix_inverse_root(A, 4, 1e-6, fallback="never"), return_mode="median") * 1e3
            times.setdefault((n, batch[0] if batch else 1, label), []).append(us)
for (n, nb, label), v in times.items():
    print(json.dumps({"root": label, "n": n, "batch": nb, "median_us": round(statistics.median(v), 1),
                      "rounds_us": [round(x, 1) for x in v]}), flush=True)
