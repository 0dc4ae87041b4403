"""matrix_inverse_root on the small route, two kernels roots loaded in one process (each build has its own
op namespace), timed in alternating rounds with do_bench (median, us), so host and clock drift hit both
alike. Session 39's script with the sizes as an argument.
    python ab_small_roots.py old=<kernels dir> new=<kernels dir> [--sizes 33,40,48] [rounds]"""
import json, os, statistics, sys
import torch
from triton.testing import do_bench
sys.path.insert(0, os.getcwd())
import loader
args = sys.argv[1:]
sizes = [32, 48, 64]
if "--sizes" in args:
    sizes = [int(v) for v in args[args.index("--sizes") + 1].split(",")]
roots = dict(arg.split("=", 1) for arg in args if "=" in arg)
rounds = int(args[-1]) if args and args[-1].isdigit() else 3
families = {label: loader.load("linalg", root) for label, root in roots.items()}
cases = []
for dtype in (torch.float32, torch.float64):
    for n in sizes:
        for batch in ((), (64,)):
            Q, _ = torch.linalg.qr(torch.randn(*batch, n, n, device="cuda", dtype=torch.float64))
            lam = torch.logspace(0, -3, n, device="cuda", dtype=torch.float64)
            A = ((Q * lam) @ Q.mT).to(dtype)
            cases.append((dtype, n, batch, (A + A.mT) / 2))
times, errors = {}, {}
for r in range(rounds):
    for dtype, n, batch, A in cases:
        for label, f in families.items():
            us = do_bench(lambda: f.matrix_inverse_root(A, 4, 1e-6, fallback="never"), return_mode="median") * 1e3
            key = (str(dtype)[6:], n, batch[0] if batch else 1, label)
            times.setdefault(key, []).append(us)
            if r == 0:  # against the float64 eigh answer
                A64 = A.double()
                w, V = torch.linalg.eigh(A64)
                ref = (V * ((w.clamp_min(0) + 1e-6) ** -0.25).unsqueeze(-2)) @ V.mT
                X = f.matrix_inverse_root(A, 4, 1e-6, fallback="never").double()
                errors[key] = ((X - ref).norm() / ref.norm()).item()
for key, v in times.items():
    dtype, n, nb, label = key
    print(json.dumps({"root": label, "dtype": dtype, "n": n, "batch": nb, "median_us": round(statistics.median(v), 1),
                      "rounds_us": [round(x, 1) for x in v], "rel_err": float(f"{errors[key]:.3g}")}), flush=True)
