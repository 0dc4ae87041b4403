"""Dev machine A/B (session 35): CPU bfloat16 conversions in jk::widen / jk::narrow / from_opmath, c10's casts
(before, ab/s35/convbase: kernels/ from dceb887) against plain integer operations (now); bits compared."""
import sys
import time
import torch
sys.path.insert(0, ".")
import loader

FAMILIES = ["fused", "ebm", "sampling", "diffusion", "linalg"]
base = {f: loader.load(f, root="ab/s35/convbase/kernels") for f in FAMILIES}
new = {f: loader.load(f) for f in FAMILIES}


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
for dt in (torch.bfloat16,):
    X = torch.randn(1 << 17, 16).to(dt)
    mean, prec = torch.randn(16).to(dt), (torch.eye(16) + 0.1).to(dt)
    for model, params in (("gaussian", dict(mean=mean, precision=prec)), ("double_well", {}), ("rosenbrock", {}),
                          ("rastrigin", {}), ("ackley", {}), ("harmonic", {})):
        cases.append((f"{model}_energy B=2^17 D=16", lambda F, m=model, p=params: F["ebm"].energy(X, m, **p)))
        cases.append((f"{model}_score B=2^17 D=16", lambda F, m=model, p=params: F["ebm"].score(X, m, **p)))
    G = torch.randn_like(X)
    cases.append(("langevin_step no noise B=2^17 D=16", lambda F: F["ebm"].langevin_step(X, G, 0.01, noise_scale=0.0)))
    cases.append(("langevin_step B=2^17 D=16", lambda F: (torch.manual_seed(1), F["ebm"].langevin_step(X, G, 0.01))[1]))
    cases.append(("normal 1024x1000", lambda F: (torch.manual_seed(1), F["sampling"].normal(torch.zeros(1000), torch.ones(1000), 1024, dtype=dt))[1]))
    sched = base["diffusion"].ddpm_schedule(1000)
    mo, smp, noise = (torch.randn(64, 16, 512).to(dt) for _ in range(3))
    t = torch.full((64,), 500)
    cases.append(("ddpm_step 64x16x512 noise given", lambda F: F["diffusion"].ddpm_step(mo, t, smp, sched, noise=noise)))
    cx = torch.randn(8, 64, 16).to(dt)
    w, b = (torch.randn(128, 64, 5) / 18).to(dt), torch.randn(128).to(dt)
    gw, gb = torch.randn(128).to(dt), torch.randn(128).to(dt)
    cases.append(("conv1d_gn_mish 8x64x16->128", lambda F: F["diffusion"].conv1d_gn_mish(cx, w, b, gw, gb, 8)))
    A, B = torch.randn(50, 50).to(dt), torch.randn(100, 100).to(dt)
    cases.append(("kron 50x50 (x) 100x100", lambda F: F["linalg"].kron(A, B)))
    x2, y2 = torch.randn(1 << 21).to(dt), torch.randn(1 << 21).to(dt)
    cases.append(("relu_add 2^21", lambda F: F["fused"].relu_add(x2, y2, 0.5)))
# every bit pattern through the conversions both ways (ebm's harmonic energy widens, its score narrows)
allbits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).reshape(-1, 16)
for F in (base, new):
    pass
assert torch.equal(base["ebm"].score(allbits, "harmonic").view(torch.int16), new["ebm"].score(allbits, "harmonic").view(torch.int16))
print("every bit pattern: same bits (harmonic score)", flush=True)
for threads in [int(t) for t in sys.argv[1:]] or [1, 2]:
    torch.set_num_threads(threads)
    print(f"threads {threads}", flush=True)
    for label, call in cases:
        assert torch.equal(call(base).view(torch.int16), call(new).view(torch.int16)), label
        rb, rn = [], []
        for _ in range(3):
            rb.append(best_us(lambda: call(base)))
            rn.append(best_us(lambda: call(new)))
        print(f"  {label:40s} base {min(rb):9.1f}  new {min(rn):9.1f} us  ({min(rb) / min(rn):.2f}x)", flush=True)
