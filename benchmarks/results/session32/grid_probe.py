"""The chains' grid: one resident wave (JK_CHAIN_GRID=0) against at most N blocks per SM (session 31's
16), langevin_chain and hmc_chain at B=2^21 and 65536, D=16, float32, over n_steps. Runs ab/s32/grid,
whose launchers read JK_CHAIN_GRID (an experiment, not in the repo).  python grid_probe.py ROOT"""
import os
import subprocess
import sys

CHILD = r'''
import sys, torch
from triton.testing import do_bench
import loader
ebm = loader.load("ebm", root=sys.argv[1])
torch.manual_seed(0)
D = 16
a = torch.randn(D, D, device="cuda")
prec = (a @ a.T / D + torch.eye(D, device="cuda")).contiguous()
mean = torch.randn(D, device="cuda")
us = lambda fn: 1000 * do_bench(fn, warmup=25, rep=150)
for B in (65536, 1 << 21):
    x = torch.randn(B, D, device="cuda")
    row = []
    for steps in (1, 4, 32):
        row.append(f"gauss {steps}: {us(lambda: ebm.langevin_chain(x, 'gaussian', steps, 0.01, mean=mean, precision=prec)):7.1f}")
        row.append(f"dw {steps}: {us(lambda: ebm.langevin_chain(x, 'double_well', steps, 0.01)):7.1f}")
    row.append(f"hmc 1: {us(lambda: ebm.hmc_chain(x, 'gaussian', 1, 0.01, 4, mean=mean, precision=prec)):7.1f}")
    row.append(f"hmc 32: {us(lambda: ebm.hmc_chain(x, 'gaussian', 32, 0.01, 4, mean=mean, precision=prec)):7.1f}")
    print(f"  B={B}: " + "  ".join(row), flush=True)
'''
for round_ in range(2):
    for policy in ("0", "16", "64", "1000"):
        print(f"JK_CHAIN_GRID={policy}", flush=True)
        subprocess.run([sys.executable, "-c", CHILD, sys.argv[1]], env={**os.environ, "JK_CHAIN_GRID": policy}, check=False)
