"""Session 52: what a write-only stream of normal's output costs under do_bench, against normal itself.

normal writes n*d outputs and reads nothing, so its floor is a pure write stream. Here torch's fill_ (the
cheapest kernel writing those bytes) and our normal, float32 and bfloat16, at #4's size (n = 65536, d = 5000),
each timed by triton's do_bench (its 256 MB write flush before each call) in alternating rounds in one process.
"""
import statistics
import sys

import torch
from triton.testing import do_bench

import loader

fam = loader.load("sampling")
n, d = 65536, 5000
mean = torch.zeros(d, device="cuda")
std = torch.ones(d, device="cuda")
outs = {dt: torch.empty(n, d, device="cuda", dtype=dt) for dt in (torch.float32, torch.bfloat16)}
cases = {}
for dt, out in outs.items():
    name = str(dt).split(".")[1]
    cases[f"fill_ {name}"] = lambda out=out: out.fill_(1.0)
    cases[f"normal {name}"] = lambda out=out: fam.normal(mean, std, n, out=out)
    # The same bytes written by torch's float32 fill (call 1: its bfloat16 fill ran at 1.43x the float32 one)
    cases[f"fill_ {name} bytes as float32"] = lambda out=out: out.view(torch.float32).fill_(1.0)
times = {k: [] for k in cases}
for _ in range(5):
    for k, fn in cases.items():
        times[k].append(1000 * do_bench(fn, warmup=25, rep=200))
print(torch.cuda.get_device_name(), torch.__version__, torch.version.cuda)
for k, v in times.items():
    print(f"{k:32s} median {statistics.median(v):7.1f} us  rounds {' '.join(f'{t:.1f}' for t in v)}")
med = {k: statistics.median(v) for k, v in times.items()}
print(f"fill_: float32 / bfloat16 = {med['fill_ float32'] / med['fill_ bfloat16']:.2f}x")
print(f"normal: float32 / bfloat16 = {med['normal float32'] / med['normal bfloat16']:.2f}x")
print(f"normal bfloat16 against fill_ bfloat16: {med['fill_ bfloat16'] / med['normal bfloat16']:.0%} of its speed")
print(f"normal bfloat16 against the float32 fill of its bytes: "
      f"{med['fill_ bfloat16 bytes as float32'] / med['normal bfloat16']:.0%} of its speed")
sys.stdout.flush()
