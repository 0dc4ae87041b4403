"""Host time per call of ops whose Autograd kernel changed in session 24, before (ab/old: 9d8aff3's
kernels, where torch's autograd fallback served them) and after, both loaded in one process."""
import sys, time, statistics
import torch
sys.path.insert(0, ".")
import loader
dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
old = {f: loader.load(f, root="ab/old/kernels") for f in ("ebm", "diffusion", "sampling")}
new = {f: loader.load(f) for f in ("ebm", "diffusion", "sampling")}
x = torch.randn(4, 8, device=dev)
m, s = torch.randn(1, 16, 2, device=dev), torch.randn(1, 16, 2, device=dev)
t = torch.tensor([5], device=dev)
def cases(F):
    sched = F["diffusion"].ddpm_schedule(100, device=dev)
    z = torch.zeros(3, device=dev)
    return {
        "harmonic_score (4x8)": lambda: F["ebm"].harmonic_score(x, 1.0),
        "ddpm_step (1x16x2, noise drawn)": lambda: F["diffusion"].ddpm_step(m, t, s, sched),
        "normal (4x3)": lambda: F["sampling"].normal(z, z + 1, 4),
        "langevin_step_ (4x8)": lambda: F["ebm"].langevin_step_(x, x, 0.01, 0.0),
    }
def per_call_us(fn, n=2000):
    for _ in range(50): fn()
    if dev == "cuda": torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n): fn()
    if dev == "cuda": torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6
A, B = cases(old), cases(new)
for name in A:
    a, b = [], []
    for _ in range(7):
        a.append(per_call_us(A[name])); b.append(per_call_us(B[name]))
    print(f"{dev} {name:34s} before {min(a):6.2f} us  after {min(b):6.2f} us  (best of 7 alternating rounds)")
