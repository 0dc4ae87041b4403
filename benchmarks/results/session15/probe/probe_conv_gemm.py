"""Probe (session 15): where conv1d_gn_mish's time goes at B=256, 256->512, L=16, K=5, and what an
im2col + GEMM route would cost against cuDNN. do_bench (L2 flush per call) as benchmarks/run.py.

    python benchmarks/results/session15/probe/probe_conv_gemm.py
"""
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
import loader  # noqa: E402

D = loader.load("diffusion")
B, CIN, COUT, L, K, G, PAD = 256, 256, 512, 16, 5, 8, 2


def bench(fn):
    return do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e3


def host_us(fn, n=200):
    """Host time per call with the GPU never waited on (enqueue cost)."""
    import time
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return host


for dtype in (torch.float32, torch.bfloat16):
    x = torch.randn(B, CIN, L, device="cuda", dtype=dtype)
    w = torch.randn(COUT, CIN, K, device="cuda", dtype=dtype) * (CIN * K) ** -0.5
    b, gw, gb = (torch.randn(COUT, device="cuda", dtype=dtype) for _ in range(3))
    w2 = w.reshape(COUT, CIN * K)

    def im2col():
        return F.pad(x, (PAD, PAD)).unfold(2, K, 1).permute(0, 1, 3, 2).reshape(B, CIN * K, L)

    cols = im2col()
    rows = {
        "ours conv1d_gn_mish": lambda: D.conv1d_gn_mish(x, w, b, gw, gb, G),
        "eager conv+gn+mish": lambda: F.mish(F.group_norm(F.conv1d(x, w, b, padding=PAD), G, gw, gb)),
        "F.conv1d alone (cuDNN)": lambda: F.conv1d(x, w, b, padding=PAD),
        "im2col alone": im2col,
        "GEMM alone, W @ cols (B, O, L)": lambda: torch.matmul(w2, cols),
        "im2col + GEMM": lambda: torch.matmul(w2, im2col()),
    }
    for tf32 in ((False, True) if dtype == torch.float32 else (False,)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for name, fn in rows.items():
            if tf32 and "GEMM" not in name:
                continue
            print(f"{str(dtype)[6:]:9s} matmul_tf32={tf32!s:5s} {name:34s} do_bench {bench(fn):8.1f} µs   "
                  f"host {host_us(fn):7.1f} µs", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    ref = F.conv1d(x.double(), w.double(), b.double(), padding=PAD)
    got = torch.matmul(w2.double(), im2col().double()) + b.double()[:, None]
    print("im2col route matches conv1d:", torch.allclose(got, ref, atol=1e-6), flush=True)
