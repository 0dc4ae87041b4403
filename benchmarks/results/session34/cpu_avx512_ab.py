"""Scratch A/B (ab/, not in git), dev machine: every family's CPU half built with the loader's flags ("base") and
with AVX-512 flags added ("avx512", from a copy of kernels/ so its key and namespace differ), timed alternately,
best of N per round; outputs compared."""
import statistics
import sys
import time
import torch
sys.path.insert(0, ".")
import loader

EXTRA = ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mprefer-vector-width=256"]
ONLY = sys.argv[1:]  # substrings of case labels (default: all)
FAMILIES = ["fused", "ebm", "sampling", "diffusion", "linalg"]
base = {f: loader.load(f) for f in FAMILIES}
loader.CXX_FLAGS = loader.CXX_FLAGS + EXTRA
new = {f: loader.load(f, root="ab/s34/cpu/kernels") for f in FAMILIES}
print("extra flags:", EXTRA, flush=True)


def best_us(fn, n=15):
    fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts) * 1e6


torch.manual_seed(0)
cases = []
for dt in (torch.float32, torch.bfloat16, torch.float16):
    x, y = torch.randn(1 << 22).to(dt), torch.randn(1 << 22).to(dt)
    cases.append((f"relu_add 2^22 {dt}", lambda F, x=x, y=y: F["fused"].relu_add(x, y, 0.5)))
for dt in (torch.float32, torch.bfloat16):
    X = torch.randn(1 << 17, 16).to(dt)
    mean, prec = torch.randn(16).to(dt), (torch.eye(16) + 0.1).to(dt)
    for model, params in (("gaussian", dict(mean=mean, precision=prec)), ("double_well", {}), ("rastrigin", {}),
                          ("ackley", {}), ("rosenbrock", {}), ("harmonic", {})):
        cases.append((f"{model}_energy B=2^17 D=16 {dt}", lambda F, X=X, m=model, p=params: F["ebm"].energy(X, m, **p)))
        cases.append((f"{model}_score B=2^17 D=16 {dt}", lambda F, X=X, m=model, p=params: F["ebm"].score(X, m, **p)))
    G = torch.randn_like(X)
    cases.append((f"langevin_step B=2^17 D=16 {dt}", lambda F, X=X, G=G: F["ebm"].langevin_step(X, G, 0.01)))
X = torch.randn(4096, 16)
mean, prec = torch.randn(16), torch.eye(16) + 0.1
cases.append(("langevin_chain gaussian B=4096 D=16 20 steps", lambda F: F["ebm"].langevin_chain(X, "gaussian", 20, 0.01, mean=mean, precision=prec)))
cases.append(("hmc_chain double_well B=4096 D=16 5x5", lambda F: F["ebm"].hmc_chain(X, "double_well", 5, 0.01, 5)))
for dt in (torch.float32, torch.bfloat16):
    cases.append((f"normal 4096x1000 {dt}", lambda F, dt=dt: F["sampling"].normal(torch.zeros(1000), torch.ones(1000), 4096, dtype=dt)))
S, sc = torch.randn(65536, 100), torch.randn(65536)
cases.append(("cem_update 65536x100 elite 6554", lambda F: F["sampling"].cem_update(S, sc, 6554, torch.zeros(100), torch.ones(100))))
sched = base["diffusion"].ddpm_schedule(1000)
for dt in (torch.float32, torch.bfloat16):
    mo, smp = torch.randn(64, 16, 512).to(dt), torch.randn(64, 16, 512).to(dt)
    noise = torch.randn(64, 16, 512).to(dt)
    t = torch.full((64,), 500)
    cases.append((f"ddpm_step 64x16x512 {dt}", lambda F, mo=mo, smp=smp, noise=noise, t=t: F["diffusion"].ddpm_step(mo, t, smp, sched, noise=noise)))
    cx = torch.randn(8, 64, 16).to(dt)
    w, b = (torch.randn(128, 64, 5) / 18).to(dt), torch.randn(128).to(dt)
    gw, gb = torch.randn(128).to(dt), torch.randn(128).to(dt)
    cases.append((f"conv1d_gn_mish 8x64x16->128 {dt}", lambda F, cx=cx, w=w, b=b, gw=gw, gb=gb: F["diffusion"].conv1d_gn_mish(cx, w, b, gw, gb, 8)))
for dt in (torch.float32, torch.bfloat16):
    A, B = torch.randn(50, 50).to(dt), torch.randn(100, 100).to(dt)
    cases.append((f"kron 50x50 (x) 100x100 {dt}", lambda F, A=A, B=B: F["linalg"].kron(A, B)))
M = torch.randn(8, 64, 128); M = M @ M.mT / 128
cases.append(("matrix_inverse_root 8x64x64", lambda F: F["linalg"].matrix_inverse_root(M, 4, 1e-6)))

ROUNDS = 3 if not ONLY else 8
print(f"{'case':48s} {'base us':>9s} {'avx512 us':>9s} {'ratio':>6s}  same")
for label, fn in cases:
    if ONLY and not any(o in label for o in ONLY):
        continue
    torch.manual_seed(1); a = fn(base)
    torch.manual_seed(1); b = fn(new)
    a_t = a if isinstance(a, (tuple, list)) else (a,)
    b_t = b if isinstance(b, (tuple, list)) else (b,)
    same = all(torch.equal(u, v) if isinstance(u, torch.Tensor) else u == v for u, v in zip(a_t, b_t))
    if not same:
        diff = max(float((u.double() - v.double()).abs().max()) for u, v in zip(a_t, b_t) if isinstance(u, torch.Tensor))
        same = f"max diff {diff:.3g}"
    rb, rn = [], []
    for _ in range(ROUNDS):
        rb.append(best_us(lambda: fn(base)))
        rn.append(best_us(lambda: fn(new)))
    tb, tn = min(rb), min(rn)
    print(f"{label:48s} {tb:9.1f} {tn:9.1f} {tb / tn:6.2f}  {same}", flush=True)
