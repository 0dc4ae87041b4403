"""Scratch A/B (ab/, not in git): kron in linear output order (ab/s34/kernels/kronlin) against linalg's kron
and torch.compile, under do_bench's write flush and with a read flush (clean L2)."""
import sys
import torch
sys.path.insert(0, ".")
import loader
from triton.testing import do_bench
sys.path.insert(0, "benchmarks")
from run import time_us_clean_l2
la = loader.linalg
kl = loader.load("kronlin", root="ab/s34/kernels")
ref = la.reference
NAMES = {0: "R1 plain", 1: "R1 stream", 2: "R2 plain", 3: "R2 stream", 4: "R4 plain", 5: "R4 stream",
         6: "R8 plain", 7: "R8 stream"}


def bench(fn):
    return do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e3, time_us_clean_l2(fn)


torch.manual_seed(0)
cases = []
for m, k in ((50, 100), (32, 64), (100, 100), (10, 200)):
    A, B = torch.randn(1, m, m, device="cuda"), torch.randn(1, k, k, device="cuda")
    A2, B2 = A[0], B[0]
    comp = torch.compile(torch.kron)
    cases.append((f"kron {m}x{m} (x) {k}x{k}", A, B, (lambda A2=A2, B2=B2: la.kron(A2, B2)),
                  (lambda comp=comp, A2=A2, B2=B2: comp(A2, B2)), torch.kron(A2, B2)))
g, x = torch.randn(256, 1024, device="cuda"), torch.randn(256, 1024, device="cuda")
comp_ps = torch.compile(lambda x, g: ref.per_sample_grad_linear(x, g, False)[0])
cases.append(("per_sample B=256 1024->1024", g[:, :, None].contiguous(), x[:, None, :].contiguous(),
              lambda: la.per_sample_grad_linear(x, g, False), lambda: comp_ps(x, g),
              ref.per_sample_grad_linear(x, g, False)[0]))
for label, A, B, ours, cfn, expected in cases:
    rows = {"ours (linalg)": bench(ours), "torch.compile": bench(cfn)}
    for v, name in NAMES.items():
        out = kl.ops.kron_linear(A, B, v)
        torch.testing.assert_close(out.view_as(expected), expected, rtol=0, atol=0)
        rows[f"v{v} {name}"] = bench(lambda v=v: kl.ops.kron_linear(A, B, v))
    rows["ours (linalg) again"] = bench(ours)
    rows["torch.compile again"] = bench(cfn)
    floor = expected.numel() * 4 / 4.25e6  # us at ~4.25 TB/s (the H200's copy rate in run.py)
    print(f"== {label}: do_bench us / clean-L2 us (write floor ~{floor:.1f} us)", flush=True)
    for key, (a, b) in rows.items():
        print(f"  {key:30s} {a:8.1f} {b:8.1f}", flush=True)
