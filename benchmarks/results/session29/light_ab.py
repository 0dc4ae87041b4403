"""Session 29, same-process GPU A/B: every family built from this tree (new: light .cu files, launchers
through jk::CudaLaunch) against the tree before it (old: ab/base/kernels, 89db91b). Both builds give the same
results, bit for bit, under one seed (the kernels' code is unchanged); then do_bench medians (us), median of 5
alternating rounds, including small calls, where the host side of a launch is most of the time."""
import statistics, sys
import torch
sys.path.insert(0, ".")
import loader
from triton.testing import do_bench
fams = ["fused", "ebm", "diffusion", "sampling", "linalg"]
new = {f: loader.load(f) for f in fams}
old = {f: loader.load(f, root="ab/base/kernels") for f in fams}
torch.manual_seed(0)
dev = "cuda"
X = torch.randn(1 << 21, 16, device=dev)
mean = torch.randn(16, device=dev) * 0.1
a = torch.randn(16, 16, device=dev); prec = a @ a.T / 16 + torch.eye(16, device=dev)
G = torch.randn_like(X)
Xc = torch.randn(65536, 16, device=dev)
m3, x3, z3 = (torch.randn(256, 16, 2048, device=dev) for _ in range(3))
t3 = torch.randint(1, 1000, (256,), device=dev)
sched = new["diffusion"].ddpm_schedule(1000, device=dev)
r1, r2 = torch.randn(1 << 26, device=dev), torch.randn(1 << 26, device=dev)
mu, sd = torch.zeros(5000, device=dev), torch.ones(5000, device=dev)
xc = torch.randn(1, 256, 16, device=dev); w = torch.randn(256, 256, 5, device=dev) * 0.05
b, gw, gb = torch.randn(256, device=dev), torch.ones(256, device=dev), torch.zeros(256, device=dev)
xb = torch.randn(256, 256, 16, device=dev); wb = torch.randn(512, 256, 5, device=dev) * 0.05
bb, gwb, gbb = torch.randn(512, device=dev), torch.ones(512, device=dev), torch.zeros(512, device=dev)
A = torch.randn(50, 50, device=dev); Bk = torch.randn(100, 100, device=dev)
Sx, Ss = torch.randn(65536, 1000, device=dev), torch.randn(65536, device=dev)
S = torch.randn(256, 256, device=dev); S = S @ S.T / 256 + 0.1 * torch.eye(256, device=dev)
cases = {
    "gaussian_energy": ("ebm", lambda f: f.gaussian_energy(X, mean, prec)),
    "gaussian_score": ("ebm", lambda f: f.gaussian_score(X, mean, prec)),
    "harmonic_energy": ("ebm", lambda f: f.harmonic_energy(X)),
    "rosenbrock_energy": ("ebm", lambda f: f.rosenbrock_energy(X)),
    "rastrigin_energy": ("ebm", lambda f: f.rastrigin_energy(X)),
    "ackley_energy": ("ebm", lambda f: f.ackley_energy(X)),
    "rosenbrock_score": ("ebm", lambda f: f.rosenbrock_score(X)),
    "ackley_score": ("ebm", lambda f: f.ackley_score(X)),
    "langevin_step": ("ebm", lambda f: f.langevin_step(X, G, 0.01)),
    "langevin_chain gaussian 65536x16 x100": ("ebm", lambda f: f.langevin_chain(Xc, "gaussian", 100, 0.01, mean=mean, precision=prec)),
    "hmc_chain gaussian 65536x16 x100 L10": ("ebm", lambda f: f.hmc_chain(Xc, "gaussian", 100, 0.05, 10, mean=mean, precision=prec)),
    "ddpm_step drawn": ("diffusion", lambda f: f.ddpm_step(m3, t3, x3, sched)),
    "ddim_step eta=0": ("diffusion", lambda f: f.ddim_step(m3, t3, t3 - 1, x3, sched)),
    "conv1d_gn_mish B=1": ("diffusion", lambda f: f.conv1d_gn_mish(xc, w, b, gw, gb, 8)),
    "conv1d_gn_mish B=256": ("diffusion", lambda f: f.conv1d_gn_mish(xb, wb, bb, gwb, gbb, 8)),
    "relu_add 2^26": ("fused", lambda f: f.relu_add(r1, r2, 0.5)),
    "normal d=5000 f32": ("sampling", lambda f: f.normal(mu, sd, 65536)),
    "normal d=5000 bf16": ("sampling", lambda f: f.normal(mu, sd, 65536, dtype=torch.bfloat16)),
    "kron 50x50 100x100": ("linalg", lambda f: f.kron(A, Bk)),
    "matrix_inverse_root n=256": ("linalg", lambda f: f.matrix_inverse_root(S, 4)),
    # small calls, where the host side of a launch is the time
    "relu_add 1024": ("fused", lambda f: f.relu_add(r1[:1024], r2[:1024], 0.5)),
    "normal n=1024 d=10": ("sampling", lambda f: f.normal(mu[:10], sd[:10], 1024)),
    "cem_update 65536x1000 elite 6554": ("sampling", lambda f: f.cem_update(Sx, Ss, 6554, mu[:1000], sd[:1000])),
    "ddpm_step 1x16x2 drawn": ("diffusion", lambda f: f.ddpm_step(m3[:1, :, :2], t3[:1], x3[:1, :, :2], sched)),
    "langevin_step 64x16": ("ebm", lambda f: f.langevin_step(X[:64], G[:64], 0.01)),
    "gaussian_score 64x16": ("ebm", lambda f: f.gaussian_score(X[:64], mean, prec)),
}
def results(fam, fn, F):
    torch.manual_seed(1)
    out = fn(F[fam])
    torch.cuda.synchronize()
    return out if isinstance(out, tuple) else (out,)
for name, (fam, fn) in cases.items():
    o, n = results(fam, fn, old), results(fam, fn, new)
    same = all(torch.equal(a, b) for a, b in zip(o, n))
    print(f"  {name:40s} old and new outputs equal bit for bit: {same}")
rows = {}
for r in range(5):
    for name, (fam, fn) in cases.items():
        for label, F in (("old", old), ("new", new)):
            ms = do_bench(lambda: fn(F[fam]), warmup=25, rep=100, return_mode="median")
            rows.setdefault((name, label), []).append(ms * 1e3)
print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}: do_bench medians, median of 5 alternating rounds (us)")
for name in cases:
    o, n = (statistics.median(rows[name, label]) for label in ("old", "new"))
    print(f"  {name:40s} old {o:9.1f}  new {n:9.1f}  new/old {n / o:5.3f}")
