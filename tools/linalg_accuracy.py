"""Relative error of matrix_inverse_root (float32, CUDA) against float64 eigh over n, p and the
condition number: the numbers behind the accuracy bar, printed as a table."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import loader  # noqa: E402
from test_linalg import random_spd, rel_err  # noqa: E402

linalg, ref = loader.linalg, loader.linalg.reference
print("n     p  cond   rel err   residual")
for n in (256, 1024, 1500, 4096):
    for p in (1, 2, 4, 8):
        for cond in (1e1, 1e3):
            A = random_spd(n, cond, batch=(2,), device="cuda").float()
            X, residual = linalg.matrix_inverse_root(A, p, 0.0, fallback="never", return_residual=True)
            err = rel_err(X, ref.matrix_inverse_root(A, p, 0.0))
            print(f"{n:5d} {p}  {cond:.0e}  {err:.2e}  {residual.max().item():.2e}", flush=True)
