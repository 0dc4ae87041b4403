"""Gaussian score (and energy) at B=2^21, D=16 on the tensor cores: ebm's kernels against the e16probe
variants: v0 = ebm's TF32 kernel (scores load at the top of each trip), v2 = the same with the score
software-pipelined like the energy (next trip's rows load during this trip's math and stores); U tiles.
Errors against float64; do_bench / clean-L2 times, two alternating rounds."""
import sys
import torch
import loader
from benchmarks.run import time_us, time_us_clean_l2

root = sys.argv[1]
loader.prebuild(["ebm"])
ebm = loader.load("ebm")
probe = loader.load("e16probe", root=root)
torch.manual_seed(0)
B, D = 1 << 21, 16
a = torch.randn(D, D, device="cuda", dtype=torch.float64)
prec64 = a @ a.T / D + torch.eye(D, device="cuda", dtype=torch.float64)
mean64 = torch.randn(D, device="cuda", dtype=torch.float64)
for dtype in (torch.float32, torch.bfloat16):
    x = torch.randn(B, D, device="cuda", dtype=dtype)
    mean, prec = mean64.to(dtype), prec64.to(dtype)
    d = x.double() - mean.double()
    ps = (prec.double() + prec.double().T) / 2
    ref_s, ref_e = -(d @ ps), 0.5 * ((d @ ps) * d).sum(1)
    y = torch.empty_like(x)
    print(f"{dtype}: copy of x {time_us(lambda: y.copy_(x), 'cuda'):.1f} us", flush=True)
    for score in (True, False):
        ref = ref_s if score else ref_e
        fns = {"ebm": (lambda: ebm.score(x, "gaussian", mean=mean, precision=prec)) if score else
               (lambda: ebm.energy(x, "gaussian", mean=mean, precision=prec))}
        variants = [(0, 2), (0, 4), (2, 2), (2, 4), (2, 8)] if score else [(0, 2), (0, 4)]
        for variant, tiles in variants:
            fns[f"v{variant} U={tiles}"] = (lambda v=variant, u=tiles: probe.gauss16(x, mean, prec, v, u, score))
        for name, fn in fns.items():
            out = fn().double()
            err = ((out - ref).abs() / (ref.abs() + 1)).max().item()
            print(f"  {'score' if score else 'energy'} {name:8s} max rel err {err:.2e}", flush=True)
        for rnd in range(2):
            line = [f"{name} {time_us(fn, 'cuda'):.1f}/{time_us_clean_l2(fn):.1f}" for name, fn in fns.items()]
            print(f"  {'score' if score else 'energy'} round {rnd} (do_bench / clean us): " + "; ".join(line), flush=True)
