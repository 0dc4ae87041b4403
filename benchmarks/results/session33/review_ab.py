"""The tensor-core chains of this tree (WarpTiles prologue) against af90fd3's (ab/s33/prev), one process."""
import os
import subprocess
import sys
import torch
import loader
from benchmarks.run import time_us

roots = {"prev": "ab/s33/prev/kernels", "final": None}
procs = [subprocess.Popen([sys.executable, "loader.py", "build", "ebm"],
                          env=dict(os.environ, **({"JITKERNELS_ROOT": r} if r else {}))) for r in roots.values()]
assert all(p.wait() == 0 for p in procs)
fams = {name: loader.load("ebm", root=r) for name, r in roots.items()}
torch.manual_seed(0)
D = 16
a = torch.randn(D, D, device="cuda")
prec = (a @ a.T / D + torch.eye(D, device="cuda")).contiguous()
mean = torch.randn(D, device="cuda")
x = torch.randn(70000, D, device="cuda")
outs = []
for fam in fams.values():
    torch.manual_seed(1)
    outs.append((fam.langevin_chain(x, "gaussian", 20, 0.01, mean=mean, precision=prec),
                 fam.hmc_chain(x, "gaussian", 5, 0.1, 4, mean=mean, precision=prec)))
print("langevin identical", torch.equal(outs[0][0], outs[1][0]), "hmc identical",
      torch.equal(outs[0][1][0], outs[1][1][0]) and torch.equal(outs[0][1][1], outs[1][1][1]), flush=True)
cases = [("langevin 1 step B=2^21", lambda f, xx: f.langevin_chain(xx, "gaussian", 1, 0.01, mean=mean, precision=prec), 1 << 21),
         ("langevin 100 steps B=65536", lambda f, xx: f.langevin_chain(xx, "gaussian", 100, 0.01, mean=mean, precision=prec), 65536),
         ("langevin 100 steps B=4096", lambda f, xx: f.langevin_chain(xx, "gaussian", 100, 0.01, mean=mean, precision=prec), 4096),
         ("hmc 100 steps L=10 B=65536", lambda f, xx: f.hmc_chain(xx, "gaussian", 100, 0.1, 10, mean=mean, precision=prec), 65536),
         ("hmc 100 steps L=10 B=4096", lambda f, xx: f.hmc_chain(xx, "gaussian", 100, 0.1, 10, mean=mean, precision=prec), 4096)]
for label, fn, B in cases:
    xx = torch.randn(B, D, device="cuda")
    for rnd in range(2):
        print(f"{label} round {rnd} (us): " + "; ".join(f"{n} {time_us(lambda: fn(f, xx), 'cuda'):.1f}" for n, f in fams.items()), flush=True)
