import sys, torch
sys.path.insert(0, ".")
import loader
from triton.testing import do_bench
root = sys.argv[1]
f = loader.load("flatprobe", root=root)
torch.manual_seed(0)
for dtype in (torch.float32, torch.bfloat16):
    x = torch.randn(1 << 21, 16, device="cuda", dtype=dtype)
    assert torch.equal(f.probe(x, 0), (-2 * x.float()).to(dtype))
    us = do_bench(lambda: f.probe(x, 0), warmup=25, rep=300, return_mode="median") * 1e3
    line = f"{root:16s} {str(dtype)[6:]:9s} ours {us:6.1f} us"
    if len(sys.argv) > 2:
        c = torch.compile(lambda t: (-2 * t.float()).to(t.dtype))
        c(x)
        line += f"  compile {do_bench(lambda: c(x), warmup=25, rep=300, return_mode='median') * 1e3:6.1f} us"
    print(line, flush=True)
