# CPU per-call overhead of small calls, this tree against another kernels root (argv[1]; session 30: a
# worktree of 4b7f486), one thread, alternating in one process: the dynamic-shape change left it alone.
import sys, time, torch, statistics
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import loader
torch.set_num_threads(1)
new = {f: loader.load(f) for f in ("fused", "ebm", "sampling", "linalg")}
old = {f: loader.load(f, root=sys.argv[1]) for f in ("fused", "ebm", "sampling", "linalg")}
x8 = torch.randn(8, 4); m = torch.zeros(4); s = torch.ones(4); A = torch.randn(2, 3, 3); B = torch.randn(2, 2, 2)
cases = [("relu_add 8x4", "fused", lambda F: F.relu_add(x8, x8, 0.5)),
         ("harmonic_energy 8x4", "ebm", lambda F: F.harmonic_energy(x8)),
         ("gaussian_score 8x4", "ebm", lambda F: F.gaussian_score(x8, m, torch.eye(4))),
         ("langevin_chain 8x4 3 steps", "ebm", lambda F: F.langevin_chain(x8, "harmonic", 3, 0.1)),
         ("normal 8x4", "sampling", lambda F: F.normal(m, s, 8)),
         ("kron 2x3x3 (x) 2x2x2", "linalg", lambda F: F.kron(A, B))]
def per_call_us(fn, reps=2000):
    for _ in range(200): fn()
    t = time.perf_counter()
    for _ in range(reps): fn()
    return (time.perf_counter() - t) / reps * 1e6
for name, fam, call in cases:
    a, b = [], []
    for _ in range(7):
        a.append(per_call_us(lambda: call(old[fam]))); b.append(per_call_us(lambda: call(new[fam])))
    print(f"{name:28s} old {statistics.median(a):6.2f} new {statistics.median(b):6.2f} us  new/old {statistics.median(b)/statistics.median(a):.3f}", flush=True)
