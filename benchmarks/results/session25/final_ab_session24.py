"""Same-process A/B on the GPU of session 24's kernel-side changes: ddpm/ddim_step (zero-coefficient
terms skipped; old = ab/old, 9d8aff3) and matrix_inverse_root (symmetric part + safe norm; old =
ab/l_old, 4e4f336). do_bench medians (us), alternating rounds."""
import sys, statistics
import torch
sys.path.insert(0, ".")
import loader
from triton.testing import do_bench
old_d, new_d = loader.load("diffusion", root="ab/old/kernels"), loader.load("diffusion")
old_l, new_l = loader.load("linalg", root="ab/l_old/kernels"), loader.load("linalg")
torch.manual_seed(0)
B, C, L = 256, 16, 2048
m, x = torch.randn(B, C, L, device="cuda"), torch.randn(B, C, L, device="cuda")
t = torch.randint(1, 1000, (B,), device="cuda")
sched = new_d.ddpm_schedule(1000, device="cuda")
def spd(n, batch=()):
    a = torch.randn(*batch, n, n, device="cuda")
    return a @ a.mT / n + 0.1 * torch.eye(n, device="cuda")
A256, A1024, Ab = spd(256), spd(1024), spd(256, (64,))
cases = {
    "ddpm_step 256x16x2048 drawn": lambda F: (lambda: F.ddpm_step(m, t, x, sched)),
    "ddim_step 256x16x2048 eta=0": lambda F: (lambda: F.ddim_step(m, t, t - 1, x, sched)),
}
lcases = {
    "matrix_inverse_root n=256 (never)": lambda F: (lambda: F.matrix_inverse_root(A256, 4, fallback="never")),
    "matrix_inverse_root n=1024 (never)": lambda F: (lambda: F.matrix_inverse_root(A1024, 4, fallback="never")),
    "matrix_inverse_root 64 x n=256 (never)": lambda F: (lambda: F.matrix_inverse_root(Ab, 4, fallback="never")),
    "matrix_inverse_root n=256 (auto)": lambda F: (lambda: F.matrix_inverse_root(A256, 4)),
}
rows = {}
for r in range(3):
    for name, make in cases.items():
        for label, F in (("old", old_d), ("new", new_d)):
            rows.setdefault((name, label), []).append(do_bench(make(F), warmup=25, rep=200, return_mode="median") * 1e3)
    for name, make in lcases.items():
        for label, F in (("old", old_l), ("new", new_l)):
            rows.setdefault((name, label), []).append(do_bench(make(F), warmup=10, rep=200, return_mode="median") * 1e3)
names = list(cases) + list(lcases)
print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}: medians of do_bench medians over 3 alternating rounds (us)")
for name in names:
    o, n = statistics.median(rows[(name, "old")]), statistics.median(rows[(name, "new")])
    print(f"  {name:42s} old {o:9.1f}  new {n:9.1f}  new/old {n / o:5.3f}")
