"""Dev machine A/B (session 35): ebm's CPU rows in float16 / bfloat16, widened into a buffer and then
transposed (before, ab/s35/rowsbase: kernels/ from 35ac663) against converted inside the 8 x 8 transposes
(now); float32 beside; bits compared, every 16-bit pattern included."""
import sys
import time
import torch
sys.path.insert(0, ".")
import loader

base, new = loader.load("ebm", root="ab/s35/rowsbase/kernels"), loader.load("ebm")


def best_us(fn, n=15):
    fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts) * 1e6


def same(a, b):  # equal bits, but a NaN's sign and payload (which arithmetic does not fix) may differ
    nan = a.isnan()
    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return torch.equal(nan, b.isnan()) and torch.equal(a.masked_fill(nan, 0).view(ints), b.masked_fill(nan, 0).view(ints))


for dt in (torch.bfloat16, torch.float16):  # every bit pattern, rows of 16 and of 13 (a scalar tail)
    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dt)
    for D in (16, 13):
        X = bits[: bits.numel() // D * D].reshape(-1, D)
        for op, model in (("energy", "double_well"), ("score", "double_well"), ("score", "rosenbrock"), ("energy", "ackley")):
            a, b = getattr(base, op)(X, model), getattr(new, op)(X, model)
            assert same(a, b), (dt, D, op, model)
print("every 16-bit pattern: same bits (NaN: same places; a NaN's sign and payload may differ)", flush=True)
torch.manual_seed(0)
for threads in [int(t) for t in sys.argv[1:]] or [1, 2]:
    torch.set_num_threads(threads)
    print(f"threads {threads}", flush=True)
    for D in (16, 40):
        X32 = torch.randn(1 << 17, D)
        mean, prec = torch.randn(D), torch.eye(D) + 0.1
        for model, params in (("gaussian", dict(mean=mean, precision=prec)), ("double_well", {}), ("rosenbrock", {}),
                              ("ackley", {})):
            for op in ("energy", "score"):
                row = []
                for dt in (torch.float32, torch.bfloat16, torch.float16):
                    X = X32.to(dt)
                    p = {k: v.to(dt) for k, v in params.items()}
                    call = lambda F: getattr(F, op)(X, model, **p)
                    assert same(call(base), call(new)), (model, op, dt)
                    rb, rn = [], []
                    for _ in range(3):
                        rb.append(best_us(lambda: call(base)))
                        rn.append(best_us(lambda: call(new)))
                    row.append(f"{str(dt)[6:]:8s} {min(rb):7.1f} -> {min(rn):7.1f}")
                print(f"  D={D} {model}_{op:6s}  " + "   ".join(row), flush=True)
