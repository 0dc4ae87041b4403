"""Dev machine A/B (session 35): conv1d_gn_mish on the CPU in float16, the convolution in float16 (before,
ab/s35/diffbase: a copy of kernels/ from 26075e4) against float32 (now); error against float64 math."""
import sys
import time
import torch
sys.path.insert(0, ".")
import loader

base, new = loader.load("diffusion", root="ab/s35/diffbase/kernels"), loader.load("diffusion")
R = new.reference


def best_us(fn, n=5):
    fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts) * 1e6


torch.manual_seed(0)
for threads in [int(t) for t in sys.argv[1:]] or [1, 2]:
    torch.set_num_threads(threads)
    for B, cin, cout, L in ((1, 256, 256, 16), (8, 64, 128, 16), (8, 256, 512, 16), (64, 256, 512, 16)):
        for dt in (torch.float16, torch.bfloat16):
            x = torch.randn(B, cin, L).to(dt)
            w, b = (torch.randn(cout, cin, 5) / (5 * cin) ** 0.5).to(dt), torch.randn(cout).to(dt)
            gw, gb = (1 + 0.1 * torch.randn(cout)).to(dt), (0.1 * torch.randn(cout)).to(dt)
            truth = R.conv1d_gn_mish(*(a.double() for a in (x, w, b, gw, gb)), 8)
            err = {k: (f.conv1d_gn_mish(x, w, b, gw, gb, 8).double() - truth).abs().max().item() for k, f in (("base", base), ("new", new))}
            tb, tn = best_us(lambda: base.conv1d_gn_mish(x, w, b, gw, gb, 8)), best_us(lambda: new.conv1d_gn_mish(x, w, b, gw, gb, 8))
            te = best_us(lambda: R.conv1d_gn_mish(x, w, b, gw, gb, 8))
            print(f"threads {threads} B={B} {cin}->{cout} L={L} {str(dt):15s} base {tb:9.1f} new {tn:9.1f} us ({tb / tn:5.2f}x)  "
                  f"eager {te:9.1f}  max error base {err['base']:.2e} new {err['new']:.2e}", flush=True)
