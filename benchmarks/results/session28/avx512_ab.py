"""CPU A/B (session 28; run from the repo root with a copy of kernels/ in ab/cur2): the same kernels built with the host's AVX2 flags (kernels/) and with AVX-512 at 256-bit width (ab/cur2)."""
import os, statistics, sys, time
os.environ.setdefault("JITKERNELS_CUDA", "0")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch
import loader
fams = os.environ.get("FAMS", "ebm").split()
base = {f: loader.load(f) for f in fams}
loader.CXX_FLAGS = loader.CXX_FLAGS + os.environ.get("EXTRA", "-mavx512f -mavx512vl -mavx512bw -mavx512dq -mprefer-vector-width=256").split()
new = {f: loader.load(f, root="ab/cur2/kernels") for f in fams}
B, D = 32768, 16
def t(fn, reps=40):
    fn(); ts = []
    for _ in range(reps):
        s = time.perf_counter(); fn(); ts.append(time.perf_counter() - s)
    return statistics.median(ts) * 1e6
cases = []
for dt in (torch.float32, torch.bfloat16):
    x = torch.randn(B, D, dtype=dt); m = torch.randn(D, dtype=dt); P = (torch.eye(D) + 0.1).to(dt)
    for model in ("harmonic", "double_well", "rosenbrock", "rastrigin", "ackley"):
        for kind in ("energy", "score"):
            cases.append((f"{model}_{kind} {dt}", "ebm", f"{model}_{kind}", (x,)))
    cases.append((f"gaussian_score {dt}", "ebm", "gaussian_score", (x, m, P)))
    cases.append((f"gaussian_energy {dt}", "ebm", "gaussian_energy", (x, m, P)))
    cases.append((f"langevin_step {dt}", "ebm", "langevin_step", (x, x, 0.01)))
for name, fam, op, args in cases:
    if fam not in fams: continue
    a, b = getattr(base[fam], op), getattr(new[fam], op)
    ra, rb = [], []
    for _ in range(5):
        ra.append(t(lambda: a(*args))); rb.append(t(lambda: b(*args)))
    print(f"{name:34s} avx2 {statistics.median(ra):8.1f} us  avx512/256 {statistics.median(rb):8.1f} us  ratio {statistics.median(rb)/statistics.median(ra):.3f}", flush=True)
