import sys, time, statistics, torch
sys.path.insert(0, ".")
import loader
from benchmarks.cpu_vs_gpu import workloads
torch.manual_seed(0)
ebm = loader.ebm
g = torch.Generator().manual_seed(0)
rows = [r for r in workloads("cpu") if "D=1024" not in r[1] and "steps=100" not in r[1]]
x = torch.randn(2 ** 20, 16, generator=g)
for name in ["harmonic", "rosenbrock", "ackley", "double_well", "rastrigin"]:
    rows.append((f"{name}_energy", "B=2^20 D=16", (lambda n=name: getattr(ebm, f"{n}_energy")(x)), None))
    rows.append((f"{name}_score", "B=2^20 D=16", (lambda n=name: getattr(ebm, f"{n}_score")(x)), None))
fused = loader.load("fused")
a, b = torch.randn(2 ** 24), torch.randn(2 ** 24)
rows.append(("relu_add", "2^24", lambda: fused.relu_add(a, b), None))
sampling = loader.load("sampling")
mean, std = torch.randn(4096), torch.rand(4096)
if hasattr(sampling, "normal"):
    rows.append(("normal", "n=1024 d=4096", lambda: sampling.normal(mean, std, 1024), None))
for name, size, ours, _ in rows:
    ours()
    t = []
    for _ in range(15):
        s = time.perf_counter(); ours(); t.append(time.perf_counter() - s)
    print(f"{name:28s} {size:28s} {statistics.median(t)*1e3:9.2f} ms")
