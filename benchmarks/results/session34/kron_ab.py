"""Scratch A/B (ab/, not in git): linalg's kron and per_sample_grad_linear, base (HEAD's kernels) against new
(the working tree's), next to torch.compile, alternating, under do_bench's write flush and a read flush."""
import sys
import torch
sys.path.insert(0, ".")
import loader
from triton.testing import do_bench
sys.path.insert(0, "benchmarks")
from run import time_us_clean_l2
# label=root pairs from the command line (default: base=ab/s34/base/kernels new=kernels)
ROOTS = dict(a.split("=", 1) for a in (sys.argv[1:] or ["base=ab/s34/base/kernels", "new=kernels"]))
builds = {label: loader.load("linalg", root=root) for label, root in ROOTS.items()}
ref = builds[list(builds)[-1]].reference


def bench(fn):
    return do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e3, time_us_clean_l2(fn)


torch.manual_seed(0)
cases = []
for m, k, dtype in ((50, 100, torch.float32), (32, 64, torch.float32), (100, 100, torch.float32),
                    (10, 200, torch.float32), (50, 100, torch.bfloat16), (50, 102, torch.float32),
                    (50, 101, torch.float32), (50, 101, torch.bfloat16), (50, 98, torch.bfloat16),
                    (51, 101, torch.float32), (51, 101, torch.bfloat16)):
    A, B = torch.randn(m, m, device="cuda", dtype=dtype), torch.randn(k, k, device="cuda", dtype=dtype)
    comp = torch.compile(torch.kron)
    cases.append((f"kron {m}x{m} (x) {k}x{k} {dtype}", lambda f, A=A, B=B: f.kron(A, B),
                  lambda comp=comp, A=A, B=B: comp(A, B), torch.kron(A, B), A.numel() * B.numel() * A.element_size()))
A, B = torch.randn(4096, 8, 8, device="cuda"), torch.randn(4096, 4, 4, device="cuda")
comp_b = torch.compile(ref.kron)
cases.append(("kron batched 4096 x (8x8 (x) 4x4)", lambda f: f.kron(A, B), lambda: comp_b(A, B), ref.kron(A, B),
              A.numel() * 16 * 4))
g, x = torch.randn(256, 1024, device="cuda"), torch.randn(256, 1024, device="cuda")
comp_ps = torch.compile(lambda x, g: ref.per_sample_grad_linear(x, g, False)[0])
cases.append(("per_sample B=256 1024->1024", lambda f: f.per_sample_grad_linear(x, g, False)[0],
              lambda: comp_ps(x, g), ref.per_sample_grad_linear(x, g, False)[0], 256 * 1024 * 1024 * 4))
for label, call, cfn, expected, nbytes in cases:
    for f in builds.values():
        torch.testing.assert_close(call(f), expected, rtol=0, atol=0)
    rows = {}
    for rnd in range(2):
        for name, fn in [*((label, lambda f=f: call(f)) for label, f in builds.items()), ("torch.compile", cfn)]:
            rows.setdefault(name, []).append(bench(fn))
    print(f"== {label}: do_bench us / clean-L2 us, two rounds (write floor ~{nbytes / 4.25e6:.1f} us at 4.25 TB/s)",
          flush=True)
    for name, vals in rows.items():
        print(f"  {name:15s} " + "   ".join(f"{a:8.1f} {b:8.1f}" for a, b in vals), flush=True)

x3 = torch.randn(256, 1023, device="cuda")
comp_ps3 = torch.compile(lambda x, g: ref.per_sample_grad_linear(x, g, False)[0])
expected = ref.per_sample_grad_linear(x3, g, False)[0]
rows = {}
for f in builds.values():
    torch.testing.assert_close(f.per_sample_grad_linear(x3, g, False)[0], expected, rtol=0, atol=0)
for rnd in range(2):
    for name, fn in [*((label, lambda f=f: f.per_sample_grad_linear(x3, g, False)) for label, f in builds.items()),
                     ("torch.compile", lambda: comp_ps3(x3, g))]:
        rows.setdefault(name, []).append(bench(fn))
print("== per_sample B=256 1023->1024 (odd rows: one element per vector)")
for name, vals in rows.items():
    print(f"  {name:15s} " + "   ".join(f"{a:8.1f} {b:8.1f}" for a, b in vals), flush=True)
