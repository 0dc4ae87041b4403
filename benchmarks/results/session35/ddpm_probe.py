"""Scratch probe (ab/, not in git): ddpm_step at 256x16x2048 float32 against same-size copies and simple
compiled elementwise ops, under do_bench's write flush and a read flush; kernel variants given as label=root."""
import sys
import torch
sys.path.insert(0, ".")
import loader
from triton.testing import do_bench
sys.path.insert(0, "benchmarks")
from run import time_us_clean_l2, copy_rate_gbps

ROOTS = dict(a.split("=", 1) for a in sys.argv[1:])
builds = {label: loader.load("diffusion", root=root) for label, root in ROOTS.items()}
fused = loader.load("fused")


def bench(fn):
    return do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e3, time_us_clean_l2(fn)


rate = copy_rate_gbps("cuda")
print(f"copy rate {rate:.1f} GB/s", flush=True)
torch.manual_seed(0)
B, C, L = 256, 16, 2048
m, x, z = (torch.randn(B, C, L, device="cuda") for _ in range(3))
n = m.numel() * 4
t_row = torch.randint(1, 1000, (B,), device="cuda")
t_one = torch.tensor(500, device="cuda")
t_zero = torch.zeros((), dtype=torch.long, device="cuda")
t_prev = t_row - 1
D0 = builds[list(builds)[0]]
sched = D0.ddpm_schedule(1000, "linear", device="cuda")
src67, dst67 = torch.empty(2 * n // 4, device="cuda"), torch.empty(2 * n // 4, device="cuda")
src50, dst50 = torch.empty(3 * n // 8, device="cuda"), torch.empty(3 * n // 8, device="cuda")
lin3 = torch.compile(lambda m, x, z: 0.9 * m + 0.8 * x + 0.1 * z)
lin2 = torch.compile(lambda m, x: 0.9 * m + 0.8 * x)
relu2 = torch.compile(lambda m, x: torch.relu(m) + x)
cases = [
    ("copy 134MB", lambda: dst67.copy_(src67), 4 * n),
    ("copy 100MB", lambda: dst50.copy_(src50), 3 * n),
    ("compile 0.9m+0.8x+0.1z (134MB)", lambda: lin3(m, x, z), 4 * n),
    ("compile 0.9m+0.8x (100MB)", lambda: lin2(m, x), 3 * n),
    ("compile relu(m)+x (100MB)", lambda: relu2(m, x), 3 * n),
    ("ours relu_add (100MB)", lambda: fused.relu_add(m, x, 0.5), 3 * n),
]
for label, D in builds.items():
    cases += [
        (f"{label} ddpm given row-t (134MB)", lambda D=D: D.ddpm_step(m, t_row, x, sched, z), 4 * n),
        (f"{label} ddpm given one-t (134MB)", lambda D=D: D.ddpm_step(m, t_one, x, sched, z), 4 * n),
        (f"{label} ddpm drawn row-t (100MB)", lambda D=D: D.ddpm_step(m, t_row, x, sched), 3 * n),
        (f"{label} ddpm drawn one-t (100MB)", lambda D=D: D.ddpm_step(m, t_one, x, sched), 3 * n),
        (f"{label} ddpm t=0 none (100MB)", lambda D=D: D.ddpm_step(m, t_zero, x, sched), 3 * n),
        (f"{label} ddim row-t (100MB)", lambda D=D: D.ddim_step(m, t_row, t_prev, x, sched), 3 * n),
    ]
# every variant gives base's bits (same seed, same draws), at the big shape and at odd ones
def outputs(D):
    res = []
    for shape, dtype in (((B, C, L), torch.float32), ((3, 5, 7), torch.float32), ((4096, 2), torch.float32),
                         ((300, 1), torch.float32), ((8, 3, 40), torch.bfloat16), ((5, 33), torch.float16)):
        g = torch.Generator(device="cuda").manual_seed(3)
        mm, xx, zz = (torch.randn(shape, device="cuda", generator=g).to(dtype) for _ in range(3))
        tt = torch.randint(0, 1000, (shape[0],), device="cuda", generator=g)
        for call in (lambda: D.ddpm_step(mm, tt, xx, sched), lambda: D.ddpm_step(mm, tt, xx, sched, zz),
                     lambda: D.ddpm_step(mm, tt[0], xx, sched),
                     lambda: D.ddim_step(mm, tt.clamp(min=1), tt.clamp(min=1) - 1, xx, sched, eta=0.5),
                     lambda: D.ddpm_step(mm, tt, xx, sched, prediction_type="v_prediction")):
            torch.manual_seed(5)
            res.append(call())
    return res
expected = outputs(D0)
for label, D in builds.items():
    for a, b in zip(outputs(D), expected):
        assert torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num()), label
print("outputs equal to", list(builds)[0], "for", list(builds), flush=True)
results = {label: ([], []) for label, _, _ in cases}
for rnd in range(3):
    for label, fn, nbytes in cases:
        a, b = bench(fn)
        results[label][0].append(a)
        results[label][1].append(b)
for label, fn, nbytes in cases:
    floor = nbytes / rate / 1e3
    a, b = sorted(results[label][0])[1], sorted(results[label][1])[1]
    print(f"{label:40s} do_bench {a:7.2f} us ({floor / a:5.1%} of floor)  clean {b:7.2f} us ({floor / b:5.1%})  runs {['%.1f' % v for v in results[label][0]]}", flush=True)
