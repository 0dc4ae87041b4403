"""CUDA cem_update across n (session 49: selection and elite list in one cluster up to n = 2^18).

Times ours (triton do_bench, median) against reference.py (stable sort, gather, mean and std), float32, d = 16 (so the selection,
not the elite rows' statistics, is most of the time) and d = 1000, elite = n / 10. n = 2^18 is the
largest size the cluster kernel takes, 2^18 + 1 the smallest the multi-block passes take.
"""
import torch
from triton.testing import do_bench

import loader
from kernels.sampling import reference as ref

sampling = loader.load("sampling")
print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}; "
      f"cem_update float32, elite = n // 10; us (do_bench median)")
print(f"{'n':>8} {'d':>5} {'ours':>8} {'eager':>8} {'x eager':>8}")
for d in (16, 1000):
    for n in (4096, 65536, 2**18, 2**18 + 1, 2**20):
        if n * d > 2**28:
            continue
        x = torch.randn(n, d, device="cuda")
        scores = torch.randn(n, device="cuda")
        mean, std = torch.zeros(d, device="cuda"), torch.ones(d, device="cuda")
        n_elite = n // 10
        t_ours = do_bench(lambda: sampling.cem_update(x, scores, n_elite, mean, std), return_mode="median") * 1e3
        t_eager = do_bench(lambda: ref.cem_update(x, scores, n_elite, mean, std), return_mode="median") * 1e3
        print(f"{n:>8} {d:>5} {t_ours:8.1f} {t_eager:8.1f} {t_eager / t_ours:8.2f}")
