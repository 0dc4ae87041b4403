"""matrix_inverse_root at n = 32 / 48 / 64, two kernels roots loaded in one process (each build has its
own op namespace), timed in alternating rounds with do_bench (median, us), so host and clock drift hit
both alike. Session 38 saw float32 n = 48 / 64 at 182 / 251 us (00a6064) and 286 / 390 (922304a) on
two hosts.   python ab_small_roots.py old=<kernels dir> new=<kernels dir> [rounds]"""
import json, os, statistics, sys
import torch
from triton.testing import do_bench
sys.path.insert(0, os.getcwd())
import loader
roots = dict(arg.split("=", 1) for arg in sys.argv[1:] if "=" in arg)
rounds = int(sys.argv[-1]) if sys.argv[-1].isdigit() else 3
families = {label: loader.load("linalg", root) for label, root in roots.items()}
cases = []
for dtype in (torch.float32, torch.float64):
    for n in (32, 48, 64):
        for batch in ((), (64,)):
            Q, _ = torch.linalg.qr(torch.randn(*batch, n, n, device="cuda", dtype=torch.float64))
            lam = torch.logspace(0, -3, n, device="cuda", dtype=torch.float64)
            A = ((Q * lam) @ Q.mT).to(dtype)
            cases.append((dtype, n, batch, (A + A.mT) / 2))
times = {}
for r in range(rounds):
    for dtype, n, batch, A in cases:
        for label, f in families.items():
            us = do_bench(lambda: f.matrix_inverse_root(A, 4, 1e-6, fallback="never"), return_mode="median") * 1e3
            times.setdefault((str(dtype)[6:], n, batch[0] if batch else 1, label), []).append(us)
for (dtype, n, nb, label), v in times.items():
    print(json.dumps({"root": label, "dtype": dtype, "n": n, "batch": nb, "median_us": round(statistics.median(v), 1),
                      "rounds_us": [round(x, 1) for x in v]}), flush=True)
