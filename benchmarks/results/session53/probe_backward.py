"""Session 53 probe: where forward + backward of gaussian_energy (B=1024, D=1000) and conv1d_gn_mish
(B=256 256->512 L=16 bfloat16) spend device time, ours against eager (torch.profiler, 5 iterations)."""
import torch
from torch.profiler import ProfilerActivity, profile

import loader

ebm, diffusion = loader.load("ebm"), loader.load("diffusion")
torch.manual_seed(0)
x = torch.randn(1024, 1000, device="cuda", requires_grad=True)
mean = torch.randn(1000, device="cuda")
a = torch.randn(1000, 1000, device="cuda", dtype=torch.float64)
precision = (a @ a.T / 1000 + torch.eye(1000, device="cuda", dtype=torch.float64)).float()
xc = torch.randn(256, 256, 16, device="cuda", dtype=torch.bfloat16, requires_grad=True)
w = (torch.randn(512, 256, 5, device="cuda", dtype=torch.bfloat16) * (256 * 5) ** -0.5).requires_grad_()
b, gw, gb = (torch.randn(512, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
cases = {
    "gaussian ours": lambda: ebm.gaussian_energy(x, mean, precision).sum().backward(),
    "gaussian eager": lambda: ebm.reference.gaussian_energy(x, mean, precision).sum().backward(),
    "conv ours": lambda: diffusion.conv1d_gn_mish(xc, w, b, gw, gb, 8).float().sum().backward(),
    "conv eager": lambda: diffusion.reference.conv1d_gn_mish(xc, w, b, gw, gb, 8).float().sum().backward(),
}
for name, fn in cases.items():
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
    print(f"==== {name}")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=70))
