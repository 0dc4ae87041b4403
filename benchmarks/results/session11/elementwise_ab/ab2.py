import sys, torch
sys.path.insert(0, ".")
import loader
from triton.testing import do_bench
root = sys.argv[1]
f = loader.load("flatprobe", root=root)
torch.manual_seed(0)
for variant, shape in ((0, (1 << 21, 16)), (1, (1 << 26,))):
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(*shape, device="cuda", dtype=dtype)
        us = do_bench(lambda: f.probe(x, variant), warmup=25, rep=300, return_mode="median") * 1e3
        line = f"{root:16s} inputs={variant + 1} {str(dtype)[6:]:9s} ours {us:6.1f} us"
        if len(sys.argv) > 2:
            ref = (lambda t: (-2 * t.float()).to(t.dtype)) if variant == 0 else (lambda t: (t.float() + t.float()).to(t.dtype))
            c = torch.compile(ref); c(x)
            line += f"  compile {do_bench(lambda: c(x), warmup=25, rep=300, return_mode='median') * 1e3:6.1f} us"
        print(line, flush=True)
