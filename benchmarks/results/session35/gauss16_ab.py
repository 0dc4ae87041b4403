"""Dev machine A/B (session 35): the Gaussian energy and score on the CPU for D > 64 (a matrix product) in
float16, before (ab/s35/ebmbase: kernels/ from 75e4415, the product in float16) against now (in float32);
error against float64 math."""
import sys
import time
import torch
sys.path.insert(0, ".")
import loader

base, new = loader.load("ebm", root="ab/s35/ebmbase/kernels"), loader.load("ebm")


def best_us(fn, n=5):
    fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts) * 1e6


torch.manual_seed(0)
torch.set_num_threads(2)
for B, D in ((4096, 128), (4096, 256), (1024, 1024)):
    for dt in (torch.float16, torch.bfloat16):
        x, mean = torch.randn(B, D).to(dt), torch.randn(D).to(dt)
        G = torch.randn(D, D)
        prec = (G @ G.T / D + torch.eye(D)).to(dt)
        for op in ("gaussian_energy", "gaussian_score"):
            truth = getattr(new, op)(x.double(), mean.double(), prec.double())
            err = {k: (getattr(f, op)(x, mean, prec).double() - truth).abs().max().item() / truth.abs().max().item() for k, f in (("base", base), ("new", new))}
            tb, tn = best_us(lambda: getattr(base, op)(x, mean, prec)), best_us(lambda: getattr(new, op)(x, mean, prec))
            print(f"B={B} D={D} {str(dt):15s} {op:16s} base {tb:10.1f} new {tn:10.1f} us ({tb / tn:6.2f}x)  "
                  f"max error / max |truth|: base {err['base']:.1e} new {err['new']:.1e}", flush=True)
