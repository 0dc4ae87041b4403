"""Session 12: where the host time of matrix_inverse_root (p=4, float32, CUDA) goes: torch.profiler CPU times."""
import sys
import torch
sys.path.insert(0, ".")
import loader
from benchmarks.cases_linalg import _spd

f = loader.linalg
for n in (256, 1024):
    A = _spd(n, 1e3, (), "cuda")
    for _ in range(5):
        f.matrix_inverse_root(A, 4, 1e-6, fallback="never")
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            f.matrix_inverse_root(A, 4, 1e-6, fallback="never")
        torch.cuda.synchronize()
    print(f"== n={n} (5 calls)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=70))
