"""Dev machine A/B (session 35; the base build is a copy of kernels/ from before the session, ab/s35/cpubase): the 16-bit CPU elementwise loop, HEAD's (chunked) against the
working tree's (one pass with AVX-512 where the CPU has it), with torch.compile beside; outputs compared bitwise."""
import sys
import time
import torch
sys.path.insert(0, ".")
import loader

base = {f: loader.load(f, root="ab/s35/cpubase/kernels") for f in ("fused", "ebm")}
new = {f: loader.load(f) for f in ("fused", "ebm")}
ref = new["fused"].reference


def best_us(fn, n=30):
    fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts) * 1e6


torch.manual_seed(0)
cases = []
for size in (1 << 21, (1 << 21) + 13):
    for dt in (torch.bfloat16, torch.float16, torch.float32):
        x, y = torch.randn(size).to(dt), torch.randn(size).to(dt)
        comp = torch.compile(lambda x, y: torch.relu(x) + y + 0.5)  # one per case: no recompile limit
        cases.append((f"relu_add {size} {dt}", lambda F, x=x, y=y: F["fused"].relu_add(x, y, 0.5), lambda x=x, y=y, comp=comp: comp(x, y)))
for dt in (torch.bfloat16, torch.float16):
    X = torch.randn(1 << 17, 16).to(dt)
    for model in ("double_well", "harmonic", "rastrigin", "ackley"):
        cases.append((f"{model}_score B=2^17 D=16 {dt}", lambda F, X=X, m=model: F["ebm"].score(X, m), None))
# every bit pattern, both halves, for exactness
for dt in (torch.bfloat16, torch.float16):
    allbits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dt)
    other = allbits.flip(0)
    a = base["fused"].relu_add(allbits, other, 0.25)
    b = new["fused"].relu_add(allbits, other, 0.25)
    assert torch.equal(a.view(torch.int16), b.view(torch.int16)), dt
print("every bit pattern: same bits", flush=True)
for threads in [int(t) for t in sys.argv[1:]] or [1, 2]:
    torch.set_num_threads(threads)
    print(f"threads {threads}")
    for label, call, cfn in cases:
        assert torch.equal(call(base).view(torch.int8), call(new).view(torch.int8)), label
        rb, rn, rc = [], [], []
        for _ in range(3):
            rb.append(best_us(lambda: call(base)))
            rn.append(best_us(lambda: call(new)))
            if cfn is not None:
                rc.append(best_us(cfn))
        c = f"compile {min(rc):8.1f}" if rc else ""
        print(f"  {label:40s} base {min(rb):8.1f}  new {min(rn):8.1f} us  ({min(rb) / min(rn):.2f}x)  {c}", flush=True)
