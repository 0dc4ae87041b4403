"""CUDA langevin_chain / hmc_chain at small D (session 48: the flat per-row stream at D = 1, 2).

Times ours (triton do_bench, median) against the eager loop of reference.py, double well, float32,
B = 65536, 100 steps (HMC: 10 leapfrog steps). Run before and after a change; prints one table.
"""
import sys

import torch
from triton.testing import do_bench

import loader
from kernels.ebm import reference as ref

ebm = loader.load("ebm")
B, n_steps, eta, n_leapfrog = 65536, 100, 0.01, 10
print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}; "
      f"B={B}, {n_steps} steps, double_well float32; us (do_bench median)")
print(f"{'chain':10} {'D':>4} {'ours':>9} {'eager':>9} {'x eager':>8}")
for D in [int(a) for a in sys.argv[1:]] or [1, 2, 3, 4, 16]:
    x = torch.randn(B, D, device="cuda")
    cases = {
        "langevin": (lambda: ebm.langevin_chain(x, "double_well", n_steps, eta),
                     lambda: ref.langevin_chain(x, ref.double_well_score, n_steps, eta)),
        "hmc": (lambda: ebm.hmc_chain(x, "double_well", n_steps, 0.1, n_leapfrog),
                lambda: ref.hmc_chain(x, ref.double_well_energy, ref.double_well_score, n_steps, 0.1, n_leapfrog)),
    }
    for name, (ours, eager) in cases.items():
        t_ours = do_bench(ours, return_mode="median") * 1e3
        t_eager = do_bench(eager, rep=200, return_mode="median") * 1e3
        print(f"{name:10} {D:>4} {t_ours:9.1f} {t_eager:9.1f} {t_eager / t_ours:8.1f}")
