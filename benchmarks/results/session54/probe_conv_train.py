"""Session 54 probe: forward + backward of conv1d_gn_mish (torch.autograd.backward with a given gradient) against
eager and torch.compile: device time per iteration (torch.profiler, 10 iterations) and wall time per iteration of
back-to-back iterations (host time included; median of 5 rounds of 20), at the issue's sizes and the sweep's."""
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

import loader

diffusion = loader.load("diffusion")
torch.manual_seed(0)
TABLES = "--tables" in sys.argv


def inputs(B, cin, cout, L, dtype):
    def r(*s, scale=1.0):
        return (torch.randn(*s, device="cuda") * scale).to(dtype).requires_grad_()
    return r(B, cin, L), r(cout, cin, 5, scale=(cin * 5) ** -0.5), r(cout, scale=0.5), r(cout), r(cout)


def wall_us(step):
    rounds = []
    for _ in range(5):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(20):
            step()
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - start) / 20 * 1e6)
    return statistics.median(rounds)


compiled = torch.compile(diffusion.reference.conv1d_gn_mish)
shapes = [(1, 256, 256, 16, torch.float32), (1, 256, 256, 16, torch.bfloat16), (8, 64, 128, 64, torch.float32),
          (64, 256, 512, 16, torch.float32), (256, 256, 512, 16, torch.float32), (256, 256, 512, 16, torch.bfloat16)]
print("shape: device us per iteration / wall us per iteration (back to back)")
for B, cin, cout, L, dtype in shapes:
    args = inputs(B, cin, cout, L, dtype)
    grad = torch.randn(B, cout, L, device="cuda", dtype=dtype)
    cases = {"ours": diffusion.conv1d_gn_mish, "eager": diffusion.reference.conv1d_gn_mish, "compile": compiled}
    line = f"B={B} {cin}->{cout} L={L} {str(dtype)[6:]}:"
    for name, op in cases.items():
        def step():
            torch.autograd.backward(op(*args, 8), grad)
        for _ in range(5):
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                step()
            torch.cuda.synchronize()
        events = prof.key_averages()
        device = sum(e.self_device_time_total for e in events) / 10
        line += f"  {name} {device:.1f} / {wall_us(step):.1f}"
        if TABLES and name == "ours":
            print(events.table(sort_by="self_cuda_time_total", row_limit=10, max_name_column_width=60))
    print(line, flush=True)
