import sys, torch
sys.path.insert(0, ".")
import loader
f = loader.load("flatprobe", root="scratch/kroot")
for variant in range(8):
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(4096, 16, device="cuda", dtype=dtype)
        try:
            y = f.probe(x, variant); torch.cuda.synchronize()
            want = x + x if variant == 1 else -2 * x
            print(f"variant {variant} {dtype}: ok, max err {float((y.float() - want.float()).abs().max()):.3g}", flush=True)
        except Exception as exc:
            print(f"variant {variant} {dtype}: {type(exc).__name__}: {str(exc).splitlines()[0]}", flush=True)
