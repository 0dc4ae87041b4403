"""The 16-bit CPU elementwise loop, A/B (session 36), in one of two modes:
  avx2:   as on CPUs without AVX-512. base = session 35's kernels with their AVX-512 loop switched off in
          the source (ab/s36/base: kernels/ at f335656), i.e. the chunked AVX2 loop; new = this tree with
          JITKERNELS_CPU_AVX512=0 (float16: the one-pass AVX2 loop; bfloat16: the chunked loop, as before).
          torch.compile beside, held to 256-bit vectors (inductor's cpp.simdlen = 256).
  avx512: base = session 35's kernels as they were (ab/s36/base512), new = this tree: the AVX-512 loop,
          now one template with the AVX2 one, must be unchanged. torch.compile beside, as it comes.
Outputs compared bitwise.
    python cpu16_ab.py avx2|avx512 [THREADS...]"""
import os
import sys
import time

MODE = sys.argv[1]
assert MODE in ("avx2", "avx512"), MODE
if MODE == "avx2":
    os.environ["JITKERNELS_CPU_AVX512"] = "0"
import torch
import torch._inductor.config

if MODE == "avx2":
    torch._inductor.config.cpp.simdlen = 256
sys.path.insert(0, ".")
import loader

base_root = "ab/s36/base/kernels" if MODE == "avx2" else "ab/s36/base512/kernels"
base = {f: loader.load(f, root=base_root) for f in ("fused", "ebm")}
new = {f: loader.load(f) for f in ("fused", "ebm")}


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
for dt in (torch.bfloat16, torch.float16):
    x, y = torch.randn(1 << 21).to(dt), torch.randn(1 << 21).to(dt)
    comp = torch.compile(lambda x, y: torch.relu(x) + y + 0.5)  # one per case: no recompile limit
    cases.append((f"relu_add 2^21 {dt}", lambda F, x=x, y=y: F["fused"].relu_add(x, y, 0.5),
                  lambda x=x, y=y, comp=comp: comp(x, y)))
for dt in (torch.bfloat16, torch.float16):
    X = torch.randn(1 << 17, 16).to(dt)
    for model in ("double_well", "harmonic", "rastrigin", "ackley"):
        cases.append((f"{model}_score B=2^17 D=16 {dt}", lambda F, X=X, m=model: F["ebm"].score(X, m), None))
for dt in (torch.bfloat16, torch.float16):  # every bit pattern, both halves
    allbits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dt)
    a = base["fused"].relu_add(allbits, allbits.flip(0), 0.25)
    b = new["fused"].relu_add(allbits, allbits.flip(0), 0.25)
    assert torch.equal(a.view(torch.int16), b.view(torch.int16)), dt
print("every bit pattern: same bits", flush=True)
for threads in [int(t) for t in sys.argv[2:]] or [1, 2]:
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
        c = f"compile{'(256-bit)' if MODE == 'avx2' else ''} {min(rc):8.1f}" if rc else ""
        print(f"  {label:36s} base {min(rb):8.1f}  new {min(rn):8.1f} us  ({min(rb) / min(rn):.2f}x)  {c}", flush=True)
