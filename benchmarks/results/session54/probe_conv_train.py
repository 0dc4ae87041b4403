"""Session 54 probe: forward + backward of conv1d_gn_mish against eager and torch.compile (device time per iteration
by torch.profiler, 10 iterations, and the top kernels of ours), at the issue's two sizes in float32 and bfloat16."""
import torch
from torch.profiler import ProfilerActivity, profile

import loader

diffusion = loader.load("diffusion")
torch.manual_seed(0)


def inputs(B, cin, cout, L, dtype):
    def r(*s, scale=1.0):
        return (torch.randn(*s, device="cuda") * scale).to(dtype).requires_grad_()
    return r(B, cin, L), r(cout, cin, 5, scale=(cin * 5) ** -0.5), r(cout, scale=0.5), r(cout), r(cout)


compiled = torch.compile(diffusion.reference.conv1d_gn_mish)
for B, cin, cout, L in ((1, 256, 256, 16), (256, 256, 512, 16)):
    for dtype in (torch.float32, torch.bfloat16):
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
            total = sum(e.self_device_time_total for e in events) / 10
            line += f"  {name} {total:.1f} us"
            if name == "ours" and B == 256:
                print(events.table(sort_by="self_cuda_time_total", row_limit=10, max_name_column_width=60))
        print(line, flush=True)
