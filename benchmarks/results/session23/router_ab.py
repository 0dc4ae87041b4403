"""Per-call time of differentiable ops, the tree before session 23's autograd router (ab/old/kernels)
against this one, loaded in one process, alternating (medians of 5 rounds, µs per call)."""
import statistics, sys, time
import torch
sys.path.insert(0, ".")
import loader
dev = "cuda" if torch.cuda.is_available() else "cpu"
trees = {"before": "ab/old/kernels", "router": None}
fams = {k: {n: loader.load(n, root) for n in ("fused", "diffusion")} for k, root in trees.items()}

def per_call(fn, n=2000):
    for _ in range(200): fn()
    if dev == "cuda": torch.cuda.synchronize()
    s = time.perf_counter()
    for _ in range(n): fn()
    if dev == "cuda": torch.cuda.synchronize()
    return (time.perf_counter() - s) / n * 1e6

x = torch.randn(16, device=dev); y = torch.randn(16, device=dev)
xg = x.clone().requires_grad_(); yg = y.clone().requires_grad_()
cx = torch.randn(1, 256, 16, device=dev); w = torch.randn(256, 256, 5, device=dev) * 0.05
b = torch.randn(256, device=dev); gw = torch.ones(256, device=dev); gb = torch.zeros(256, device=dev)
cases = {
    "relu_add 16 elements": lambda f: f["fused"].relu_add(x, y, 0.5),
    "relu_add 16, inputs requiring grad": lambda f: f["fused"].relu_add(xg, yg, 0.5),
    "conv1d_gn_mish B=1 256->256 L=16": lambda f: f["diffusion"].conv1d_gn_mish(cx, w, b, gw, gb, 8),
}
print(f"device {torch.cuda.get_device_name() if dev == 'cuda' else 'cpu'}, torch {torch.__version__}")
for name, fn in cases.items():
    times = {k: [] for k in trees}
    for _ in range(5):
        for k in trees:
            times[k].append(per_call(lambda: fn(fams[k])))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{name:38s} before {med['before']:7.2f} us  router {med['router']:7.2f} us  ({med['before'] / med['router']:.2f}x)")
