"""16-bit energies and scores of every model at B=2^21, D=16 against a copy of x (do_bench), to see
which stand far from the memory floor.  python energy16_probe.py"""
import torch
from triton.testing import do_bench

import loader

ebm = loader.load("ebm")
torch.manual_seed(0)
B, D = 1 << 21, 16
a = torch.randn(D, D, device="cuda")
prec = (a @ a.T / D + torch.eye(D, device="cuda")).contiguous()
mean = torch.randn(D, device="cuda")
us = lambda fn: 1000 * do_bench(fn, warmup=25, rep=200)  # noqa: E731
for dtype in (torch.float32, torch.bfloat16):
    x = torch.randn(B, D, device="cuda", dtype=dtype)
    y = torch.empty_like(x)
    copy = us(lambda: y.copy_(x))
    print(f"{dtype}: copy of x {copy:.1f} us (energy floor ~{copy / 2 * (1 + 1 / D):.1f}, score floor ~{copy:.1f})")
    for model in ["gaussian", "double_well", "harmonic", "rosenbrock", "rastrigin", "ackley"]:
        params = dict(mean=mean.to(dtype), precision=prec.to(dtype)) if model == "gaussian" else {}
        t_e = us(lambda: ebm.energy(x, model, **params))
        t_s = us(lambda: ebm.score(x, model, **params))
        print(f"  {model:12s} energy {t_e:6.1f}  score {t_s:6.1f}")
