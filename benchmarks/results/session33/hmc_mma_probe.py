"""Gaussian hmc_chain at D = 16 on the tensor cores (this tree) against the thread-per-row kernel
(ab/s33/base). Same draws: with P = 0 (every proposal accepted) the chains must agree bit for bit; with a
real P, rows agree to float32 rounding unless an accept decision flips. Then times (do_bench), alternating."""
import os
import subprocess
import sys
import torch
import loader
from benchmarks.run import time_us

roots = {"base": "ab/s33/base/kernels", "new": None}
procs = [subprocess.Popen([sys.executable, "loader.py", "build", "ebm"],
                          env=dict(os.environ, **({"JITKERNELS_ROOT": r} if r else {}))) for r in roots.values()]
assert all(p.wait() == 0 for p in procs)
fams = {name: loader.load("ebm", root=r) for name, r in roots.items()}
torch.manual_seed(0)
D = 16
a = torch.randn(D, D, device="cuda")
prec = (a @ a.T / D + torch.eye(D, device="cuda")).contiguous()
mean = torch.randn(D, device="cuda")


def hmc(fam, x, n, p=prec, L=5, eps=0.1, **kw):
    torch.manual_seed(5)
    return fam.hmc_chain(x, "gaussian", n, eps, L, mean=mean, precision=p, **kw)


for B in (100, 4096 + 5, 70000):
    x = torch.randn(B, D, device="cuda")
    (o0, r0), (b0, br0) = hmc(fams["new"], x, 3, torch.zeros_like(prec)), hmc(fams["base"], x, 3, torch.zeros_like(prec))
    (o1, r1, t1), (b1, br1, bt1) = hmc(fams["new"], x, 50, thin=10), hmc(fams["base"], x, 50, thin=10)
    rows_close = ((o1 - b1).abs().amax(1) < 1e-4).float().mean().item()
    print(f"B={B}: P=0 identical {torch.equal(o0, b0)} rates {r0.min().item():.2f}-{r0.max().item():.2f} "
          f"equal {torch.equal(r0, br0)}; real P: rows within 1e-4 {rows_close:.5f}, max diff {(o1 - b1).abs().max():.2e}, "
          f"accept mean {r1.mean():.4f} vs {br1.mean():.4f}, rates equal in {(r1 == br1).float().mean():.5f} of rows, "
          f"traj {tuple(t1.shape)}", flush=True)
cases = [(65536, 100, 10), (1 << 21, 1, 4), (1 << 21, 32, 4), (4096, 100, 10)]
for B, n, L in cases:
    xx = torch.randn(B, D, device="cuda")
    for rnd in range(2):
        line = [f"{name} {time_us(lambda: fam.hmc_chain(xx, 'gaussian', n, 0.1, L, mean=mean, precision=prec), 'cuda'):.1f}"
                for name, fam in fams.items()]
        print(f"hmc B={B} steps={n} L={L} round {rnd} (us): " + "; ".join(line), flush=True)
