"""cem_update's statistics kernel: rows of loads in flight (JK_EXP_STATS_ROWS) and blocks per SM
(JK_EXP_STATS_BPS), temporary switches of session 49's experiment. One setting per process (the launcher
reads them once): checks the result against reference.py, then times cem_update (do_bench median) at the
bar's shape and two others."""
import os

import torch
from triton.testing import do_bench

import loader
from kernels.sampling import reference as ref

sampling = loader.load("sampling")
setting = f"rows={os.environ.get('JK_EXP_STATS_ROWS', '8')} bps={os.environ.get('JK_EXP_STATS_BPS', '2')}"
for n, d, n_elite, dtype in ((65536, 1000, 6554, torch.float32), (4096, 1000, 410, torch.float32),
                             (65536, 4096, 6554, torch.float32), (65536, 1000, 6554, torch.float64)):
    x = torch.randn(n, d, device="cuda", dtype=dtype)
    scores = torch.randn(n, device="cuda", dtype=dtype)
    mean, std = torch.zeros(d, device="cuda", dtype=dtype), torch.ones(d, device="cuda", dtype=dtype)
    got = sampling.cem_update(x, scores, n_elite, mean, std)
    want = ref.cem_update(x, scores, n_elite, mean, std)
    ok = all(torch.allclose(g, w, atol=2e-5, rtol=2e-5) for g, w in zip(got, want))
    t = do_bench(lambda: sampling.cem_update(x, scores, n_elite, mean, std), rep=300, return_mode="median") * 1e3
    print(f"{setting:16} n={n:6} d={d:5} elite={n_elite:5} {str(dtype)[6:]:8} {t:7.1f} us  {'ok' if ok else 'WRONG'}")
