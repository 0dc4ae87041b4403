"""Session 50: does test_cem_minimize_in_a_cuda_graph_reuses_its_memory_from_call_to_call catch a graph pool per
call? Measures memory_reserved growth over 5 calls of cem_minimize(cuda_graph=True) as shipped, then with the
pool reuse turned off (a mutant: _graph_reuse forgets every graph), then times the example's CEM size."""
import sys
import time

import torch

import loader

fam = loader.sampling
module = next(m for name, m in sys.modules.items() if name.startswith("_jk_ops_jk_sampling_"))


class NoReuse(dict):
    def get(self, key, default=None):
        return default

    def __setitem__(self, key, value):
        pass


def growth_mb():  # the test's case
    def run():
        fam.cem_minimize(lambda x: (x * x).sum(-1), torch.zeros(4, device="cuda"), 1.0, 2**20, 64, 3, cuda_graph=True)

    for _ in range(2):
        run()
    torch.cuda.synchronize()
    before = torch.cuda.memory_reserved()
    for _ in range(5):
        run()
    torch.cuda.synchronize()
    return (torch.cuda.memory_reserved() - before) / 2**20


print(f"shipped: memory_reserved grew {growth_mb():.1f} MB over 5 calls (the test's bound: 16 MB)")
module._graph_reuse = NoReuse()
print(f"mutant, a pool per call: grew {growth_mb():.1f} MB over 5 calls")
module._graph_reuse = {}

# per-iteration time at the example's size, as a function of n_iters (the capture is paid once per call)
fn = loader.ebm.rosenbrock_energy
mean, std = torch.zeros(1000, device="cuda"), torch.full((1000,), 2.0, device="cuda")
for iters in (10, 50, 200):
    for cuda_graph in (False, True):
        fam.cem_minimize(fn, mean, std, 8192, 819, iters, cuda_graph=cuda_graph)
        best = float("inf")
        for _ in range(5):
            torch.cuda.synchronize()
            start = time.perf_counter()
            fam.cem_minimize(fn, mean, std, 8192, 819, iters, cuda_graph=cuda_graph)
            torch.cuda.synchronize()
            best = min(best, time.perf_counter() - start)
        print(f"n=8192 d=1000 iters={iters:4d} cuda_graph={cuda_graph!s:5}: {best / iters * 1e6:8.1f} us per iteration")
