"""Session 12: matrix_inverse_root p=4 at n=1024 measured 1365.7 us (8.1x eigh) against 965.6 (s8) and 1017.9 (s11).
Host-bound or GPU-bound? Per n: do_bench (as the harness), the host's time to enqueue one call (no sync), and
a CUDA-graph replay of the same call (no host work in the timed region)."""
import sys, time, statistics
import torch
sys.path.insert(0, ".")
import loader
from benchmarks.run import time_us
from benchmarks.cases_linalg import _spd

f = loader.linalg
ref = f.reference
for n, batch in [(256, ()), (1024, ()), (4096, ())]:
    A = _spd(n, 1e3, batch, "cuda")
    ours = lambda: f.matrix_inverse_root(A, 4, 1e-6, fallback="never")
    eigh = lambda: ref.matrix_inverse_root_eigh(A, 4, 1e-6)
    for _ in range(3):
        ours()
    torch.cuda.synchronize()
    enq = []
    for _ in range(30):
        torch.cuda.synchronize()
        t = time.perf_counter(); ours(); enq.append(time.perf_counter() - t)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            ours()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        ours()
    rounds = []
    for r in range(3):
        rounds.append((time_us(ours, "cuda"), time_us(g.replay, "cuda"), time_us(eigh, "cuda") if n <= 1024 else float("nan")))
    print(f"n={n}: host enqueue per call {statistics.median(enq) * 1e6:.0f} us (no sync); "
          + "; ".join(f"round {i}: do_bench {a:.1f}, graph replay {b:.1f}, eigh {c:.1f} ({c / a:.2f}x, graph {c / b:.2f}x)"
                      for i, (a, b, c) in enumerate(rounds)), flush=True)
