"""Session 10: is initcheck's report in split_bf16x3 (and racecheck's crash) about cuBLAS's bf16 GEMM?"""
import sys
import torch
sys.path.insert(0, ".")
mode = sys.argv[1]
torch.manual_seed(0)
n = 256
if mode in ("names", "root"):
    import loader
    linalg = loader.load("linalg")
    A = torch.randn(2, n, n, device="cuda")
    A = A @ A.mT / n + torch.eye(n, device="cuda")
def root():
    X = linalg.matrix_inverse_root(A, 4, 0.0, fallback="never")
    print("root ok", float(X.sum()))
def bmm():
    a = torch.randn(2, n, 6 * n, device="cuda").bfloat16()
    b = torch.randn(2, 6 * n, n, device="cuda").bfloat16()
    c = torch.bmm(a, b, out_dtype=torch.float32)
    d = c * 2.0  # an elementwise read of the GEMM's output
    print("bmm ok", float(d.sum()))
if mode == "names":
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        root(); bmm(); torch.cuda.synchronize()
    names = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
    print("\n".join(names))
elif mode == "root":
    root()
else:
    bmm()
