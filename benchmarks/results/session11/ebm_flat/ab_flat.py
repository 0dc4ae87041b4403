"""A/B: separable scores on the shared elementwise launcher (JK_AB_FLAT=1) vs the row-tile kernel."""
import os, sys, torch
sys.path.insert(0, ".")
import loader
from triton.testing import do_bench
ebm = loader.load("ebm")
torch.manual_seed(0)
mode = os.environ.get("JK_AB_FLAT", "0")
for dtype in (torch.float32, torch.bfloat16):
    x = torch.randn(1 << 21, 16, device="cuda", dtype=dtype)
    for model in ("harmonic", "double_well", "rastrigin"):
        f = getattr(ebm, f"{model}_score")
        us = do_bench(lambda: f(x), warmup=25, rep=300, return_mode="median") * 1e3
        print(f"flat={mode} {model}_score {str(dtype)[6:]} {us:.1f} us", flush=True)
