"""Same-process A/B on the GPU of session 25's changes against session 24's: ddpm/ddim_step (4 absent-term
selects, none for drawn noise) and matrix_inverse_root (7 launches before the iteration, not 12).
Variants: old = 9d8aff3 / 4e4f336 kernels (before session 24's fixes), cur = e600511, new = the tree.
do_bench medians (us), medians over 5 alternating rounds."""
import sys, statistics
import torch
sys.path.insert(0, ".")
import loader
from triton.testing import do_bench
variants = {"diffusion": {"old": "ab/old/kernels", "cur": "ab/cur/kernels", "new": None},
            "linalg": {"old": "ab/l_old/kernels", "cur": "ab/cur/kernels", "new": None}}
F = {(fam, label): loader.load(fam, root=root) for fam, v in variants.items() for label, root in v.items()}
torch.manual_seed(0)
B, C, L = 256, 16, 2048
m, x, z = (torch.randn(B, C, L, device="cuda") for _ in range(3))
t = torch.randint(1, 1000, (B,), device="cuda")
sched = F["diffusion", "new"].ddpm_schedule(1000, device="cuda")
def spd(n, batch=()):
    a = torch.randn(*batch, n, n, device="cuda")
    return a @ a.mT / n + 0.1 * torch.eye(n, device="cuda")
A64, A256, A1024, Ab = spd(64), spd(256), spd(1024), spd(256, (64,))
cases = {
    ("diffusion", "ddpm_step 256x16x2048 drawn"): lambda f: (lambda: f.ddpm_step(m, t, x, sched)),
    ("diffusion", "ddpm_step 256x16x2048 given noise"): lambda f: (lambda: f.ddpm_step(m, t, x, sched, noise=z)),
    ("diffusion", "ddim_step 256x16x2048 eta=0"): lambda f: (lambda: f.ddim_step(m, t, t - 1, x, sched)),
    ("diffusion", "ddim_step 256x16x2048 eta=1 drawn"): lambda f: (lambda: f.ddim_step(m, t, t - 1, x, sched, eta=1.0)),
    ("linalg", "matrix_inverse_root n=64 (never)"): lambda f: (lambda: f.matrix_inverse_root(A64, 4, fallback="never")),
    ("linalg", "matrix_inverse_root n=256 (never)"): lambda f: (lambda: f.matrix_inverse_root(A256, 4, fallback="never")),
    ("linalg", "matrix_inverse_root n=1024 (never)"): lambda f: (lambda: f.matrix_inverse_root(A1024, 4, fallback="never")),
    ("linalg", "matrix_inverse_root 64 x n=256 (never)"): lambda f: (lambda: f.matrix_inverse_root(Ab, 4, fallback="never")),
    ("linalg", "matrix_inverse_root n=256 (auto)"): lambda f: (lambda: f.matrix_inverse_root(A256, 4)),
}
rows = {}
for r in range(5):
    for (fam, name), make in cases.items():
        for label in variants[fam]:
            ms = do_bench(make(F[fam, label]), warmup=25, rep=150, return_mode="median")
            rows.setdefault((name, label), []).append(ms * 1e3)
print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}: medians of do_bench medians over 5 alternating rounds (us)")
for fam, name in cases:
    o, c, n = (statistics.median(rows[name, label]) for label in ("old", "cur", "new"))
    print(f"  {name:40s} old {o:8.1f}  cur {c:8.1f}  new {n:8.1f}  new/old {n / o:5.3f}  new/cur {n / c:5.3f}")
