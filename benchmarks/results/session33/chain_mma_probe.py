"""Gaussian langevin_chain at D = 16 on the tensor cores (variants ab/s33/vU*T*: U tiles of 16 rows per warp,
T threads per block) against the thread-per-row kernel (ab/s33/base). Same draws: with P = 0 the chains
must agree bit for bit; with a real P to float32 rounding. Then times (do_bench), alternating."""
import os
import subprocess
import sys
import torch
import loader
from benchmarks.run import time_us

roots = {"base": "ab/s33/base/kernels"} | {v: f"ab/s33/{v}/kernels" for v in sys.argv[1:]}
procs = [subprocess.Popen([sys.executable, "loader.py", "build", "ebm"], env=dict(os.environ, JITKERNELS_ROOT=r))
         for r in roots.values()]
assert all(p.wait() == 0 for p in procs)
fams = {name: loader.load("ebm", root=r) for name, r in roots.items()}
torch.manual_seed(0)
D = 16
a = torch.randn(D, D, device="cuda")
prec = (a @ a.T / D + torch.eye(D, device="cuda")).contiguous()
mean = torch.randn(D, device="cuda")
zero = torch.zeros(D, D, device="cuda")


def chain(fam, x, n, p=prec, **kw):
    torch.manual_seed(5)
    return fam.langevin_chain(x, "gaussian", n, 0.01, mean=mean, precision=p, **kw)


x = torch.randn(4096 + 5, D, device="cuda")
for name, fam in fams.items():
    if name == "base":
        continue
    out0, ref0 = chain(fam, x, 3, zero)[0], chain(fams["base"], x, 3, zero)[0]
    out1, ref1 = chain(fam, x, 1)[0], chain(fams["base"], x, 1)[0]
    (o, ot), (r, rt) = chain(fam, x, 100, thin=10), chain(fams["base"], x, 100, thin=10)
    oc, rc = chain(fam, x, 20, clamp=0.5)[0], chain(fams["base"], x, 20, clamp=0.5)[0]
    print(f"{name}: P=0 identical {torch.equal(out0, ref0)}; 1 step max diff {(out1 - ref1).abs().max():.2e}; "
          f"100 steps {(o - r).abs().max():.2e}, traj {tuple(ot.shape)} {(ot - rt).abs().max():.2e}; "
          f"clamped {(oc - rc).abs().max():.2e} (|x| max {oc.abs().max():.3f})", flush=True)
cases = [(f"{n} steps B={B}", torch.randn(B, D, device="cuda"), n, {})
         for B, n in ((1 << 21, 1), (1 << 21, 32), (1 << 18, 100), (65536, 100), (16384, 100), (4096, 100))]
for label, xx, n, kw in cases:
    for rnd in range(2):
        line = [f"{name} {time_us(lambda: fam.langevin_chain(xx, 'gaussian', n, 0.01, mean=mean, precision=prec, **kw), 'cuda'):.1f}"
                for name, fam in fams.items()]
        print(f"{label} round {rnd} (us): " + "; ".join(line), flush=True)
