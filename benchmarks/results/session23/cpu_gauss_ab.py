import torch, time, sys
sys.path.insert(0, "/work/main")
import loader
new = loader.load("ebm"); old = loader.load("ebm", "ab/old/kernels (git archive of the commit before)")
torch.manual_seed(0); torch.set_num_threads(2)
def t(f, n=20):
    for _ in range(3): f()
    ts = []
    for _ in range(n):
        s = time.perf_counter(); f(); ts.append(time.perf_counter() - s)
    ts.sort(); return ts[len(ts)//2] * 1e3
for D in [int(a) for a in sys.argv[1:]] or [5, 16, 64]:
    B = 32768
    A = torch.randn(D, D); P32 = A @ A.T / D + torch.eye(D); m32 = torch.randn(D)
    x16 = torch.randn(B, D).bfloat16(); P16 = P32.bfloat16(); m16 = m32.bfloat16()
    xc = torch.randn(4096, D)
    cases = {
        "bf16 score": lambda e: e.gaussian_score(x16, m16, P16),
        "bf16 energy": lambda e: e.gaussian_energy(x16, m16, P16),
        "f32 langevin_chain": lambda e: e.langevin_chain(xc, "gaussian", 20, 0.01, mean=m32, precision=P32),
        "f32 hmc_chain": lambda e: e.hmc_chain(xc, "gaussian", 5, 0.05, 4, mean=m32, precision=P32),
        "f64 langevin_chain": lambda e: e.langevin_chain(xc.double(), "gaussian", 20, 0.01, mean=m32.double(), precision=P32.double()),
    }
    for name, f in cases.items():
        o, n = [], []
        for rep in range(3):
            o.append(t(lambda: f(old), n=7 if "chain" in name else 20)); n.append(t(lambda: f(new), n=7 if "chain" in name else 20))
        print(f"D={D:3d} {name:20s} old {min(o):8.3f} new {min(n):8.3f}  ({min(o)/min(n):.2f}x)", flush=True)
