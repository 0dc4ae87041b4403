"""matrix_inverse_root's small-matrix kernel over n = 8..64, both of small_product's load paths (16-byte A
loads where n is a multiple of 16 / sizeof(T), scalar ones otherwise), single matrix and a batch of 64,
against eigh; do_bench medians (us)."""
import json, os, sys
import torch
from triton.testing import do_bench
sys.path.insert(0, os.getcwd())
import loader
f = loader.load("linalg")
for dtype in (torch.float32, torch.float64):
    for n in (8, 16, 33, 50, 63, 64):
        for batch in ((), (64,)):
            Q, _ = torch.linalg.qr(torch.randn(*batch, n, n, device="cuda", dtype=torch.float64))
            lam = torch.logspace(0, -3, n, device="cuda", dtype=torch.float64)
            A = ((Q * lam) @ Q.mT).to(dtype)
            A = (A + A.mT) / 2
            ours = do_bench(lambda: f.matrix_inverse_root(A, 4, 1e-6, fallback="never"), return_mode="median") * 1e3
            eigh = (do_bench(lambda: f.reference.matrix_inverse_root_eigh(A, 4, 1e-6), return_mode="median") * 1e3
                    if not batch or n <= 16 else float("nan"))
            X = f.matrix_inverse_root(A, 4, 1e-6, fallback="never")
            R = f.reference.matrix_inverse_root(A.double(), 4, 1e-6)
            print(json.dumps({"dtype": str(dtype)[6:], "n": n, "batch": batch[0] if batch else 1,
                              "ours_us": round(ours, 1), "eigh_us": round(eigh, 1),
                              "rel_err": float(((X.double() - R).norm() / R.norm()))}), flush=True)
