"""Session 12: what a read-dominated op of an energy's size can reach under the harness's timing.
B=2^21, D=16 float32: an energy reads 134 MB and writes 8.4 MB. Rows: our energies, torch.compile's,
and torch's own reductions (x.sum(): 134 MB read, nothing written; x.sum(1): the energy's traffic),
each timed (a) as benchmarks/run.py does (do_bench: the L2 flushed by writing 256 MB, whose dirty lines
are written back during the timed call) and (b) after a flush by reading 256 MB (clean lines)."""
import sys, statistics
import torch
sys.path.insert(0, ".")
import loader
from benchmarks.run import time_us, copy_rate_gbps
from kernels.ebm import reference as ref

dev = "cuda"
rate = copy_rate_gbps(dev)
B, D = 1 << 21, 16
x = torch.randn(B, D, device=dev)
ebm = loader.ebm
flush_buf = torch.empty(256 << 20, dtype=torch.int8, device=dev)


def time_clean_us(fn, reps=200):
    for _ in range(10):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        flush_buf.sum(dtype=torch.int32)  # reads 256 MB: L2 ends full of clean lines
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3


xb = B * D * 4
half = torch.empty(71 * 10**6 // 4, device=dev); half2 = torch.empty_like(half)
rows = [("copy, 71 MB read + 71 MB written", lambda: half2.copy_(half), 2 * half.numel() * 4),
        ("torch x.sum() (134 MB read)", lambda: x.sum(), xb),
        ("torch x.sum(1) (energy traffic)", lambda: x.sum(1), xb + B * 4)]
for model in ["harmonic", "double_well", "rosenbrock", "rastrigin", "ackley"]:
    ours = getattr(ebm, f"{model}_energy")
    comp = torch.compile(ref.ENERGIES[model])
    rows.append((f"ours {model}_energy", lambda o=ours: o(x), xb + B * 4))
    rows.append((f"compile {model}_energy", lambda c=comp: c(x), xb + B * 4))
print(f"{torch.cuda.get_device_name()} torch {torch.__version__} cuda {torch.version.cuda}; copy rate {rate:.0f} GB/s")
print(f"{'what':42s} {'do_bench us':>11s} {'% floor':>7s} {'clean us':>9s} {'% floor':>7s}")
for name, fn, nbytes in rows:
    floor_us = nbytes / rate / 1e3
    a = time_us(fn, dev); b = time_clean_us(fn)
    print(f"{name:42s} {a:11.1f} {100 * floor_us / a:7.1f} {b:9.1f} {100 * floor_us / b:7.1f}", flush=True)
