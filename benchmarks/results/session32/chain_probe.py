"""Where the one-launch Langevin chain's time goes at few steps: do_bench times of langevin_chain and
hmc_chain over B and n_steps (Gaussian and double well, D=16, float32), next to gaussian_score +
langevin_step, and a copy of the same bytes. Then the Gaussian energy and score, D=16, B=2^21, in each
dtype, against a copy of the same bytes.  python chain_probe.py [kernels_root]"""
import sys

import torch
from triton.testing import do_bench

import loader

root = sys.argv[1] if len(sys.argv) > 1 else None
ebm = loader.load("ebm", root=root) if root else loader.load("ebm")
torch.manual_seed(0)
D = 16
a = torch.randn(D, D, device="cuda")
prec = (a @ a.T / D + torch.eye(D, device="cuda")).contiguous()
mean = torch.randn(D, device="cuda")


def us(fn):
    return 1000 * do_bench(fn, warmup=25, rep=200)


for B in (65536, 1 << 21):
    x = torch.randn(B, D, device="cuda")
    y = torch.empty_like(x)
    floor = us(lambda: y.copy_(x))
    print(f"B={B}: copy x -> y {floor:.1f} us")
    g = torch.randn_like(x)
    print(f"  gaussian_score {us(lambda: ebm.gaussian_score(x, mean, prec)):.1f}  langevin_step "
          f"{us(lambda: ebm.langevin_step(x, g, 0.01)):.1f}  double_well_score {us(lambda: ebm.double_well_score(x)):.1f}")
    for steps in (1, 2, 4, 8, 32):
        t_g = us(lambda: ebm.langevin_chain(x, "gaussian", steps, 0.01, mean=mean, precision=prec))
        t_d = us(lambda: ebm.langevin_chain(x, "double_well", steps, 0.01))
        t_h = us(lambda: ebm.hmc_chain(x, "gaussian", steps, 0.01, 4, mean=mean, precision=prec))
        print(f"  steps={steps:3d}: langevin gaussian {t_g:8.1f} ({t_g / steps:7.1f}/step)  double_well {t_d:8.1f} "
              f"({t_d / steps:7.1f}/step)  hmc gaussian L=4 {t_h:8.1f} ({t_h / steps:7.1f}/step)")

B = 1 << 21
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    x = torch.randn(B, D, device="cuda", dtype=dtype)
    m, p = mean.to(dtype), prec.to(dtype)
    y = torch.empty_like(x)
    e = torch.empty(B, device="cuda", dtype=dtype)
    t_copy = us(lambda: y.copy_(x))
    t_s = us(lambda: ebm.gaussian_score(x, m, p))
    t_e = us(lambda: ebm.gaussian_energy(x, m, p))
    print(f"{str(dtype):15s} B={B} D={D}: copy x {t_copy:6.1f}  gaussian_score {t_s:6.1f} ({100 * t_copy / t_s:3.0f}% of the copy)"
          f"  gaussian_energy {t_e:6.1f}")
